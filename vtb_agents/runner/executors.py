"""Executors: how a run's tasks are spread over workers. Results come back to one writer.

``LocalExecutor`` runs tasks in a thread pool driven by asyncio with bounded concurrency (model
calls are network-bound, sandboxes are separate processes). Setting ``stop`` (Ctrl-C) stops
scheduling: running tasks finish and are written, the rest wait for ``--resume``.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Protocol, runtime_checkable

from vtb_agents.results import TaskResult
from vtb_agents.tasks.model import Task

if TYPE_CHECKING:
    from vtb_agents.config import RunConfig

Work = Callable[[Task], TaskResult]
Sink = Callable[[TaskResult], None]


class Executor(Protocol):
    """Runs ``work`` on every task and hands each result to ``sink`` (always from one thread)."""

    def run(self, tasks: Iterable[Task], work: Work, sink: Sink, stop: threading.Event) -> None:
        """Run until every task is done or ``stop`` is set (then finish the running ones)."""
        ...


@runtime_checkable
class RemoteExecutor(Protocol):
    """Runs tasks in other processes, whose workers rebuild the run's resources from its config."""

    def run_remote(self, tasks: Iterable[Task], config: RunConfig, out: Path, judge_cache: Path, sink: Sink,
                   stop: threading.Event) -> None:
        """Like :meth:`Executor.run`, for workers that cannot share this process's objects."""
        ...


@dataclass(frozen=True)
class LocalExecutor:
    """At most ``concurrency`` tasks at once on this machine."""

    concurrency: int = 1

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")

    def run(self, tasks: Iterable[Task], work: Work, sink: Sink, stop: threading.Event) -> None:
        """Run the tasks; results reach ``sink`` in the calling thread, in the order they finish."""
        asyncio.run(self._run(list(tasks), work, sink, stop))

    async def _run(self, tasks: list[Task], work: Work, sink: Sink, stop: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="vtb-task") as pool:
            slots = asyncio.Semaphore(self.concurrency)
            running: set[asyncio.Task[None]] = set()

            async def one(task: Task) -> None:
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
