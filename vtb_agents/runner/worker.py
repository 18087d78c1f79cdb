"""One worker process's share of a run: its plan rebuilt and its resources opened once, then one task at a time.

Executors whose tasks run in other processes (the Ray actors of ``ray_executor.py``, the local
processes of ``process_executor.py``) cannot ship the ``work`` closure of a :class:`RunJob`: it
holds the run's SQLite checkpointer, verdict cache and models. Each worker process is sent the
records of the run's plan and rebuilds its objects from them, once
(:func:`~vtb_agents.runner.plan.build_plan`, the function the driver built its own with: no spec
is decoded anew), its clients paced by the driver's account budgets that its executor serves it,
then opens its resources with the run directory ``out`` and the verdict cache
``judge_cache`` the job names, and a checkpoint database of its own,
``OUT/checkpoints-{index}.sqlite`` (no two processes write one checkpoint file), and sends each
result back as its ``results.jsonl`` line: the parent alone writes ``results.jsonl`` (``rundir/lock.py``).
"""

from __future__ import annotations

import os
import socket
import tempfile
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

from vtb_agents.models.limiter import Budgets
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.layout import ARTIFACTS_DIR, RUN_FILE, worker_checkpoints
from vtb_agents.runner.executors import TaskEpoch
from vtb_agents.runner.plan import PlanRecords, RunPlan, build_plan
from vtb_agents.runner.resources import RunResources, open_plan
from vtb_agents.runner.run import run_task
from vtb_agents.runner.saving import storage_cause


def check_writable(root: Path) -> None:
    """Raise a RunError unless this process can create ``root`` and write in it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as exc:
        raise RunError(f"a worker on {socket.gethostname()} cannot write {root} ({exc}): the run directory "
                       "must be writable by every worker process (shared storage on a cluster)") from exc


class TaskWorker:
    """Worker ``index`` of a run: its plan rebuilt from the plan's ``records`` and its resources
    opened, once, then one episode at a time (from any thread).

    Start-up failures are kept (not raised) so that ``ready`` can report them to the driver.
    ``budgets``: the run's account budgets, served by the driver (None: the worker's own, for its calls alone).
    """

    def __init__(self, records: PlanRecords, out: str, judge_cache: str, index: int,
                 budgets: Budgets | None = None) -> None:
        self.config, self.index, self.budgets = records.config, index, budgets
        self.plan: RunPlan | None = None
        self.resources: RunResources | None = None
        self.error: str | None = None
        self._open = ExitStack()
        try:
            self.resources = self._open.enter_context(self._resources(records, Path(out), Path(judge_cache)))
        except Exception as exc:  # reported by ready()
            self.error = f"{type(exc).__name__}: {exc}"

    def _resources(self, records: PlanRecords, out: Path, judge_cache: Path) -> AbstractContextManager[RunResources]:
        if not (out / RUN_FILE).is_file():
            raise RunError(f"{out / RUN_FILE} is not visible on {socket.gethostname()}: the run directory "
                           "must be on storage every worker process shares")
        check_writable(out / ARTIFACTS_DIR)
        self.plan = build_plan(records, budgets=self.budgets)
        return open_plan(self.plan, artifacts=out / ARTIFACTS_DIR, judge_cache=judge_cache,
                         checkpoints=out / worker_checkpoints(self.index), run_dir=out)

    def ready(self) -> tuple[int, str | None, str | None]:
        """(process id, start-up error or None, what its plan built: :attr:`RunPlan.built
        <vtb_agents.runner.plan.RunPlan.built>`, None if it did not start)."""
        return os.getpid(), self.error, self.plan.built if self.plan is not None and self.error is None else None

    def run(self, item: TaskEpoch) -> str:
        """Run and grade one episode; its ``results.jsonl`` line (validated again by the driver)."""
        if self.resources is None:
            raise RunError(f"worker {self.index} did not start: {self.error}")
        return run_task(item.task, self.config, self.resources, epoch=item.epoch).model_dump_json()

    def close(self) -> None:
        """Close the worker's resources (checkpoint database, verdict cache)."""
        self._open.close()


class TaskFailed(RunError):
    """A task's ``run`` raised in a worker process (a storage error or a harness bug: ``run_task``
    records every other failure in the task's result). Rebuilt in the driver from its text; a disk
    error behind it stays its ``__cause__``, so that the run stops as ``runner/saving.py`` says."""


def failure_record(exc: BaseException) -> tuple[str, int | None, str | None]:
    """What a driver needs to rebuild ``exc`` raised by a task (:func:`task_failure`), as picklable
    values: its text, and the errno and message of the disk error behind it (if any)."""
    cause = storage_cause(exc)
    return f"{type(exc).__name__}: {exc}", cause.errno if cause else None, cause.strerror if cause else None


def task_failure(where: str, text: str, code: int | None, strerror: str | None) -> TaskFailed:
    """The driver's :class:`TaskFailed` for a :func:`failure_record` sent from ``where``."""
    failure = TaskFailed(f"{where}: {text}")
    if code is not None:
        failure.__cause__ = OSError(code, strerror or os.strerror(code))
    return failure

