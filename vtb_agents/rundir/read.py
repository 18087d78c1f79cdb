"""The one reader of run directories: ``run.json``, ``results.jsonl`` and ``summary.json`` read back.

Two views of a run: :func:`open_finished_run` (settings and complete results, for regrading and
analysis; problems are :class:`~vtb_agents.rundir.errors.RunError`) and :func:`load_run` /
:func:`read_meta` (for reports, which are made of finished runs only: a missing file or a partial
last line is a :class:`ReportError` that says what is wrong and what to do, never a half-empty page).
Both give typed records (:mod:`vtb_agents.rundir.records`), never the files' dicts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from vtb_agents.results import TaskResult
from vtb_agents.rundir.errors import FormatVersionError, RunError, check_format, format_version
from vtb_agents.rundir.layout import RESULTS_FILE, RUN_FILE, SUMMARY_FILE, TRANSCRIPTS_DIR
from vtb_agents.rundir.records import RUN_FORMAT, RunRecord, RunSummary
from vtb_agents.rundir.store import ResultsError, ResultsStore
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import load_tasks
from vtb_agents.transcript import TRANSCRIPT_FORMAT

_log = logging.getLogger(__name__)
TaskSource = Sequence[Task] | str | Path
FINISH_HINT = ("finish it by running its `vtb run` command again with --resume added "
               "(run.json records its settings, not which tasks it selected)")
"""How to finish an interrupted run, where only the command that started it knows its task selection."""


def _problems(exc: OSError | ValueError) -> str:
    """What is wrong with a record file, on one line: each bad field with the reason."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the file'}: {e['msg']}" for e in exc.errors())


def _record(path: Path, error: type[Exception]) -> RunRecord:
    """``run.json`` at ``path``; a file of another format version, or one that is not a ``run.json``,
    is an ``error`` naming it (the version is checked first: nothing else of an old file is read)."""
    try:
        raw = path.read_bytes()
        check_format(path, format_version(raw), RUN_FORMAT)
        return RunRecord.model_validate_json(raw)
    except FormatVersionError as exc:
        raise exc if isinstance(exc, error) else error(str(exc)) from None
    except (OSError, ValidationError, ValueError) as exc:
        raise error(f"{path}: not a readable {path.name}: {_problems(exc)}") from None


@dataclass
class FinishedRun:
    """A run directory's ``run.json`` (its settings are ``run.config``) and complete results."""

    path: Path
    run: RunRecord
    results: list[TaskResult]

    def tasks(self, source: TaskSource | None = None, *, needed: Sequence[str] = ()) -> dict[str, Task]:
        """Tasks by id from ``source`` (default: the run's own source); every id in ``needed`` must be there."""
        chosen = source if source is not None else self.run.config.tasks
        by_id = {t.id: t for t in (load_tasks(chosen) if isinstance(chosen, (str, Path)) else chosen)}
        missing = sorted(set(needed) - set(by_id))
        if missing:
            raise RunError(f"task id(s) of the run not found in the task source: {', '.join(missing[:10])}")
        return by_id

    def single_epoch(self, what: str) -> FinishedRun:
        """This run, if it ran each task once; a :class:`RunError` naming ``what`` (a command that
        reads one result per task) for a run with ``--epochs`` above 1."""
        if self.run.config.epochs != 1:
            raise RunError(f"{self.path}: {what} reads one result per task, and this run has "
                           f"{self.run.config.epochs} epochs per task (vtb run --epochs)")
        return self


def read_record(run_dir: Path | str) -> RunRecord:
    """``run_dir``'s ``run.json`` (its settings: ``.config``); a missing directory or file, or one of
    another format version, is a :class:`RunError`."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RunError(f"{path}: no such run directory")
    if not (path / RUN_FILE).exists():
        raise RunError(f"{path} is not a run directory (no {RUN_FILE})")
    return _record(path / RUN_FILE, RunError)


def record_if_any(run_dir: Path | str | None) -> RunRecord | None:
    """``run_dir``'s ``run.json`` (None without a run directory or ``run.json``)."""
    if run_dir is None or not (Path(run_dir) / RUN_FILE).is_file():
        return None
    return read_record(run_dir)


def open_finished_run(run_dir: Path | str) -> FinishedRun:
    """Read ``run_dir``; a missing directory, a missing ``run.json`` or a partial last result line
    (an interrupted run) is a :class:`RunError` saying what to do."""
    record = read_record(run_dir)
    path = Path(run_dir)
    results = complete_results(path, RunError)
    check_transcripts(path)
    return FinishedRun(path=path, run=record, results=results)


def check_transcripts(run_dir: Path) -> None:
    """Refuse a run whose ``transcripts/`` holds a file of another format version (a
    :class:`~vtb_agents.rundir.errors.FormatVersionError` naming it), reading only each file's start:
    a reader of the whole run checks them all before it writes anything (``vtb grade``, ``vtb report``)."""
    folder = Path(run_dir) / TRANSCRIPTS_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        with path.open("rb") as handle:
            start = handle.read(256)
        try:
            found = format_version(start)
        except ValueError:  # the version is not at the start: read the file whole
            try:
                found = format_version(path.read_bytes())
            except ValueError as exc:
                raise RunError(f"{path}: not a readable transcript: {exc}") from None
        check_format(path, found, TRANSCRIPT_FORMAT)


def complete_results(run_dir: Path, error: type[Exception]) -> list[TaskResult]:
    """The results of a finished run; a line of another format version, a torn line or a partial last
    line (an interrupted run) is an ``error`` saying what to do."""
    store = ResultsStore(run_dir)
    try:
        results, partial_at = store.load()
    except (ResultsError, FormatVersionError) as exc:
        raise exc if isinstance(exc, error) else error(str(exc)) from None
    if partial_at is not None:
        raise error(f"{store.path} ends with a partial line (the run was interrupted): "
                    f"{FINISH_HINT}")
    return results


class ReportError(ValueError):
    """A run directory that cannot be reported (names the directory and the reason)."""


@dataclass
class RunMeta:
    """What a run was (``run.json``; its settings are ``run.config``) and what it scored (``summary.json``)."""

    path: Path
    run: RunRecord
    summary: RunSummary


@dataclass
class RunData(RunMeta):
    """A run with its results and, when the task source could be loaded, its tasks by id."""

    results: list[TaskResult] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    tasks_note: str | None = None


def _existing(path: Path, what: str, hint: str) -> Path:
    if not path.exists():
        raise ReportError(f"{path.parent}: incomplete run, no {path.name} ({what}); {hint}")
    return path


def read_meta(run_dir: Path | str) -> RunMeta:
    """``run.json`` and ``summary.json`` of ``run_dir``, or a :class:`ReportError` saying what is missing."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path}: no such run directory")
    if not (path / RUN_FILE).exists() and not (path / RESULTS_FILE).exists():
        raise ReportError(f"{path}: not a run directory (no {RUN_FILE} or {RESULTS_FILE}); "
                          "make one with `vtb run --out DIR`")
    record = _record(_existing(path / RUN_FILE, "what was run", "was it written by `vtb run`?"),
                               ReportError)
    summary_file = _existing(path / SUMMARY_FILE, "the run has not finished", FINISH_HINT)
    try:
        summary = RunSummary.model_validate_json(summary_file.read_bytes())
    except (OSError, ValidationError) as exc:
        raise ReportError(f"{summary_file}: not a readable {SUMMARY_FILE}: {_problems(exc)}") from None
    return RunMeta(path=path, run=record, summary=summary.model_copy(update={"run_dir": path}))


def load_run(run_dir: Path | str, tasks: Sequence[Task] | str | Path | None = None) -> RunData:
    """Everything a report needs. ``tasks`` (tasks or a task source) defaults to the run's own source;
    if that one cannot be loaded the report goes on without prompts and golden answers (``tasks_note``),
    while a source given here that cannot be loaded is a :class:`ReportError`."""
    meta = read_meta(run_dir)
    if not (meta.path / RESULTS_FILE).exists():
        raise ReportError(f"{meta.path}: incomplete run, no {RESULTS_FILE}")
    results = complete_results(meta.path, ReportError)
    try:
        check_transcripts(meta.path)
    except RunError as exc:
        raise ReportError(str(exc)) from None
    data = RunData(path=meta.path, run=meta.run, summary=meta.summary, results=results)
    source = tasks if tasks is not None else meta.run.config.tasks
    loaded: Sequence[Task] = []
    if isinstance(source, (str, Path)):
        try:
            loaded = load_tasks(source)
        except Exception as exc:  # the run's own source may be gone: that only costs the task texts
            if tasks is not None:
                raise ReportError(f"task source {str(source)!r}: {exc}") from None
            data.tasks_note = f"task source {str(source)!r} could not be loaded ({type(exc).__name__}: {exc})"
    else:
        loaded = source
    data.tasks = {t.id: t for t in loaded}
    missing = [r.task_id for r in results if r.task_id not in data.tasks]
    if missing and not data.tasks_note:
        data.tasks_note = (f"{len(missing)} task(s) of the run are not in the task source "
                           f"(e.g. {missing[0]!r}): their prompts and golden answers are not shown")
    return data


def recorded_pacing(out: Path) -> dict[str, Any] | None:
    """The ``rate_limits`` of the summary in ``out`` (a resumed run adds its counts to them, a regrade keeps
    them); None if there
    is none (a run killed before its first summary: its requests are not counted), or it is unreadable (logged)."""
    path = out / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        summary = RunSummary.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as exc:  # a pydantic ValidationError is a ValueError
        _log.warning("%s: the earlier rate-limit counts are not readable (%s): this run counts its own only", path, exc)
        return None
    return summary.rate_limits.model_dump(mode="json")
