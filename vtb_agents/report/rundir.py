"""Read a finished run directory (``run.json``, ``results.jsonl``, ``summary.json``) for reporting.

Reports are made of finished runs only: a missing file or a partial last line is a
:class:`ReportError` that says what is wrong and what to do, never a half-empty page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.results import TaskResult
from vtb_agents.rundir.store import RESULTS_FILE, ResultsError, ResultsStore
from vtb_agents.tasks.model import Task

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"


class ReportError(ValueError):
    """A run directory that cannot be reported (names the directory and the reason)."""


@dataclass
class RunMeta:
    """What a run was (``run.json``) and what it scored (``summary.json``)."""

    path: Path
    run: dict[str, Any]
    summary: dict[str, Any]

    @property
    def config(self) -> dict[str, Any]:
        """The run's ``RunConfig`` as recorded."""
        return dict(self.run.get("config") or {})


@dataclass
class RunData(RunMeta):
    """A run with its results and, when the task source could be loaded, its tasks by id."""

    results: list[TaskResult] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    tasks_note: str | None = None


def _read_json(path: Path, what: str, hint: str) -> dict[str, Any]:
    if not path.exists():
        raise ReportError(f"{path.parent}: incomplete run, no {path.name} ({what}); {hint}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: unreadable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return data


def read_meta(run_dir: Path | str) -> RunMeta:
    """``run.json`` and ``summary.json`` of ``run_dir``, or a :class:`ReportError` saying what is missing."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path}: no such run directory")
    if not (path / RUN_FILE).exists() and not (path / RESULTS_FILE).exists():
        raise ReportError(f"{path}: not a run directory (no {RUN_FILE} or {RESULTS_FILE}); "
                          "make one with `vtb run --out DIR`")
    run = _read_json(path / RUN_FILE, "what was run", "was it written by `vtb run`?")
    resume = f"finish it with `vtb run --resume --out {path}` (same options as the run)"
    summary = _read_json(path / SUMMARY_FILE, "the run has not finished", resume)
    return RunMeta(path=path, run=run, summary=summary)


def load_run(run_dir: Path | str, tasks: Sequence[Task] | str | Path | None = None) -> RunData:
    """Everything a report needs. ``tasks`` (tasks or a task source) defaults to the run's own source;
    if that one cannot be loaded the report goes on without prompts and golden answers (``tasks_note``),
    while a source given here that cannot be loaded is a :class:`ReportError`."""
    meta = read_meta(run_dir)
    store = ResultsStore(meta.path)
    if not store.path.exists():
        raise ReportError(f"{meta.path}: incomplete run, no {RESULTS_FILE}")
    try:
        results, partial_at = store.load()
    except ResultsError as exc:
        raise ReportError(str(exc)) from None
    if partial_at is not None:
        raise ReportError(f"{store.path} ends with a partial line (the run was interrupted): "
                          f"finish it with `vtb run --resume --out {meta.path}`")
    data = RunData(path=meta.path, run=meta.run, summary=meta.summary, results=results)
    source = tasks if tasks is not None else meta.config.get("tasks")
    loaded: Sequence[Task] = []
    if isinstance(source, (str, Path)):
        from vtb_agents.tasks.sources import load_tasks

        try:
            loaded = load_tasks(source)
        except Exception as exc:  # the run's own source may be gone: that only costs the task texts
            if tasks is not None:
                raise ReportError(f"task source {str(source)!r}: {exc}") from None
            data.tasks_note = f"task source {str(source)!r} could not be loaded ({type(exc).__name__}: {exc})"
    elif source is None:
        data.tasks_note = "run.json names no task source"
    else:
        loaded = source
    data.tasks = {t.id: t for t in loaded}
    missing = [r.task_id for r in results if r.task_id not in data.tasks]
    if missing and not data.tasks_note:
        data.tasks_note = (f"{len(missing)} task(s) of the run are not in the task source "
                           f"(e.g. {missing[0]!r}): their prompts and golden answers are not shown")
    return data
