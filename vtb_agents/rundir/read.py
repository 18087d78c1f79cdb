"""Reading a finished run back: its settings, results and tasks (for regrading and analysis)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.results import TaskResult
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.layout import RUN_FILE
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import load_tasks

TaskSource = Sequence[Task] | str | Path


@dataclass
class FinishedRun:
    """A run directory's ``run.json`` and complete results."""

    path: Path
    run: dict[str, Any]
    results: list[TaskResult]

    def tasks(self, source: TaskSource | None = None, *, needed: Sequence[str] = ()) -> dict[str, Task]:
        """Tasks by id from ``source`` (default: the run's own source); every id in ``needed`` must be there."""
        chosen = source if source is not None else self.run["config"]["tasks"]
        by_id = {t.id: t for t in (load_tasks(chosen) if isinstance(chosen, (str, Path)) else chosen)}
        missing = sorted(set(needed) - set(by_id))
        if missing:
            raise RunError(f"task id(s) of the run not found in the task source: {', '.join(missing[:10])}")
        return by_id


def open_finished_run(run_dir: Path | str) -> FinishedRun:
    """Read ``run_dir``; a missing directory, a missing ``run.json`` or a partial last result line
    (an interrupted run) is a :class:`RunError` saying what to do."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RunError(f"{path}: no such run directory")
    run_file = path / RUN_FILE
    if not run_file.exists():
        raise RunError(f"{path} is not a run directory (no {RUN_FILE})")
    results, partial_at = ResultsStore(path).load()
    if partial_at is not None:
        raise RunError(f"{path}: results.jsonl ends with a partial line: resume the run first (vtb run --resume)")
    return FinishedRun(path=path, run=json.loads(run_file.read_text(encoding="utf-8")), results=results)
