"""Handing a run's tasks to workers in other processes, and their results to the one writer.

The driver loop that the Ray executor and the local process executor share: a task goes to a free
slot (a worker's room for one more task) as long as tasks are left and ``stop`` is not set; each
finished task frees its slot, and its ``results.jsonl`` line reaches ``sink`` here, in the
driver's thread, in the order tasks finish. A task that raised and a worker that died are kept as
errors and reported once every running task has finished; a lost worker's slots take no more tasks.
Each worker rebuilds the run's plan from its records and says what it built; a worker that built
another plan than the driver's (another version of vtb_agents or of a plugin there) fails the run before any task
(:func:`check_built`).
A disk error in a worker sets ``stop`` at once (``runner/saving.py``: no task starts whose result
could not be saved).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from vtb_agents.results import TaskResult
from vtb_agents.rundir.errors import RunError, StoppedRun
from vtb_agents.runner.executors import Sink, TaskEpoch
from vtb_agents.runner.saving import storage_cause

S = TypeVar("S", bound=Hashable)


class WorkerLost(StoppedRun):
    """A worker process died mid-run: the tasks it was running were not saved (the message names
    them and how it died); the other workers went on, and ``--resume`` runs the lost tasks."""


def check_sizes(concurrency: int, workers: int | None) -> None:
    """Raise ValueError unless ``concurrency`` and ``workers`` (None: the executor's default) are at least 1."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")


def check_built(where: str, built: str | None, expected: str) -> None:
    """Raise a RunError unless the worker ``where`` built the plan the driver built (``expected``)."""
    if built != expected:
        raise RunError(f"{where} built another plan from the run's records than this process did: {built} "
                       f"instead of {expected} (is the same version of vtb_agents and of your plugins "
                       "installed there?)")


def task_label(item: TaskEpoch) -> str:
    """How messages name a unit of work handed to a worker: its task id, and its epoch after the first."""
    return item.task.id if item.epoch == 1 else f"{item.task.id} (epoch {item.epoch})"


@dataclass(frozen=True)
class Finished(Generic[S]):
    """One task's end in the worker behind ``slot``: its ``results.jsonl`` line, or the ``error``
    it ended with; ``lost`` if the worker is gone (its slots take no more tasks)."""

    slot: S
    line: str | None = None
    error: BaseException | None = None
    lost: bool = False


class Workers(Protocol[S]):
    """Workers in other processes, each with one or more slots (a slot per task it may run at once)."""

    def submit(self, slot: S, task: TaskEpoch) -> bool:
        """Start ``task`` on the worker of ``slot``; False if that worker is gone (the task stays to run)."""
        ...

    def finished(self, timeout: float) -> list[Finished[S]]:
        """The tasks that ended since the last call, waiting up to ``timeout`` seconds for one."""
        ...


def drive(tasks: Iterable[TaskEpoch], slots: Sequence[S], workers: Workers[S], sink: Sink, stop: threading.Event,
          poll_s: float = 0.5) -> list[BaseException]:
    """Run ``tasks`` on ``workers`` until all are done, ``stop`` is set or no worker is left; the
    errors, in the order they came (the caller raises the first once its workers are closed).

    Returns only once no task is running: an exception out of here (a second Ctrl-C, say) leaves
    tasks running, which the caller must then abort.
    """
    pending, idle = deque(tasks), list(slots)
    lost: set[S] = set()
    errors: list[BaseException] = []
    running = 0
    while True:
        while idle and pending and not stop.is_set():
            slot = idle.pop()
            if slot in lost:
                continue
            if workers.submit(slot, pending[0]):
                pending.popleft()
                running += 1
            else:
                lost.add(slot)
        if not running:
            return errors
        for done in workers.finished(poll_s):  # wakes every poll_s for a Ctrl-C
            running -= 1
            if done.lost:
                lost.add(done.slot)
            else:
                idle.append(done.slot)
            if done.error is not None:
                errors.append(done.error)
                if storage_cause(done.error) is not None:
                    stop.set()
                continue
            try:
                sink(TaskResult.model_validate_json(done.line or ""))
            except Exception as exc:  # a bad line from a worker: the others still finish and are written
                errors.append(exc)
