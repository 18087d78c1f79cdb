"""Executors: how a run's tasks are spread over workers. Results come back to one writer.

Every executor implements one protocol, :class:`Executor`: it is given the episodes to run (each a
:class:`TaskEpoch`: a task and its epoch, ``vtb run --epochs``) and the :class:`RunJob` (the
in-process ``work`` and what workers elsewhere rebuild it from) and says whether it runs in this
process (``in_process``), which is what lets Python objects reach it.
``LocalExecutor`` runs tasks in a thread pool driven by asyncio with bounded concurrency (model
calls are network-bound, sandboxes are separate processes). Setting ``stop`` (Ctrl-C) stops
scheduling: running tasks finish and are written, the rest wait for ``--resume``. Executors
whose tasks run in other processes (``process_executor.py``, ``ray_executor.py``) share a worker
(``worker.py``) and a driver loop (``dispatch.py``).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from vtb_agents.results import TaskResult
from vtb_agents.tasks.model import Task

if TYPE_CHECKING:
    from vtb_agents.runner.plan import RunPlan



@dataclass(frozen=True)
class TaskEpoch:
    """One episode to run: ``task``, for the ``epoch``-th time (1..K, ``vtb run --epochs K``)."""

    task: Task
    epoch: int = 1


Work = Callable[[TaskEpoch], TaskResult]
Sink = Callable[[TaskResult], None]


@dataclass(frozen=True)
class RunJob:
    """What running a run's tasks takes: ``work`` runs one task in this process (with the resources
    it opened); workers in other processes are sent the records of the run's ``plan`` and rebuild its
    objects from them (:func:`~vtb_agents.runner.plan.build_plan`), with the run directory ``out`` and
    the verdict cache ``judge_cache``; each reports what it built (:attr:`RunPlan.built
    <vtb_agents.runner.plan.RunPlan.built>`), which must be what ``plan`` built here; their requests
    spend the account budgets of ``plan``'s limiters, which their executor serves them."""

    work: Work
    plan: RunPlan
    out: Path
    judge_cache: Path


class Executor(Protocol):
    """Runs every task of a :class:`RunJob` and hands each result to ``sink`` (always from one thread)."""

    @property
    def in_process(self) -> bool:
        """True if tasks run in this process (``job.work``), so Python objects can reach them."""
        ...

    def run(self, tasks: Iterable[TaskEpoch], job: RunJob, sink: Sink, stop: threading.Event) -> None:
        """Run until every episode is done or ``stop`` is set (then finish the running ones)."""
        ...


@dataclass(frozen=True)
class LocalExecutor:
    """At most ``concurrency`` tasks at once on this machine."""

    concurrency: int = 1

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")

    @property
    def in_process(self) -> bool:
        """Always: the tasks run in this process's threads."""
        return True

    def run(self, tasks: Iterable[TaskEpoch], job: RunJob, sink: Sink, stop: threading.Event) -> None:
        """Run ``job.work`` on the episodes; results reach ``sink`` in the calling thread, in the order they finish."""
        asyncio.run(self._run(list(tasks), job.work, sink, stop))

    async def _run(self, tasks: list[TaskEpoch], work: Work, sink: Sink, stop: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="vtb-task") as pool:
            slots = asyncio.Semaphore(self.concurrency)
            running: set[asyncio.Task[None]] = set()

            async def one(task: TaskEpoch) -> None:
                try:
                    sink(await loop.run_in_executor(pool, work, task))
                finally:
                    slots.release()

            for task in tasks:
                await slots.acquire()
                if stop.is_set():
                    slots.release()
                    break
                running.add(asyncio.create_task(one(task)))
            outcomes = list(await asyncio.gather(*running, return_exceptions=True))
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:  # every other task has finished and been written before this is raised
            raise errors[0]
