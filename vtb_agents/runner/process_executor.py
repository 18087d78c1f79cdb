"""Process executor: a run's tasks in several local processes, each running its share in threads.

Why: one process of threads spends a few milliseconds of CPU per model call (building requests,
LangGraph steps, parsing replies) under one GIL, which caps it at a few hundred calls per second
however fast the API is (BENCHMARKS.md, "Many cores"). ``--executor processes --workers K``
runs K worker processes; each runs up to its share of ``--concurrency`` N tasks at once (N / K,
the remainder spread one each) in threads, as the local executor does.

How (the pieces are the Ray executor's, shared): each worker is a
:class:`~vtb_agents.runner.worker.TaskWorker` with resources of its own (``checkpoints-{i}.sqlite``,
its own sandboxes). Workers are forked by multiprocessing's ``forkserver``: a fresh interpreter,
started once per process, that has no threads (so no fork of a process that has them) and has
loaded the worker's libraries (:data:`WORKER_MODULE`, ~1-2 s of CPU) once for all workers, whose
pages it shares with them. A worker runs with the environment this process has as the run begins
(sent with the job: what the thread executor's tasks would see) and its ``sys.path``. Workers pace
their requests by the run's limiters, which this process serves them (``runner/shared_limiters.py``):
K workers spend one account budget, not K. The driver
loop of ``runner/dispatch.py`` hands tasks to free slots and sends each result line back to this
process, whose ``sink`` alone writes ``results.jsonl``, in finish order. A Python script that runs
a process executor needs the ``if __name__ == "__main__":`` guard that multiprocessing asks for (a
worker imports the script's main module again).

* Start-up: ``prestart()`` (``vtb run`` calls it before it imports the runner itself) starts the
  fork server and the workers at once, so that the libraries load there while this process gets the
  run ready; ``run`` then hands the workers the job. This module imports nothing heavy.
* ``stop`` (Ctrl-C, SIGTERM, a full disk): no task starts; running ones finish and are written.
  Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group): the parent decides.
* This process dies (even SIGKILL): the fork server reads the end of its pipe and exits, each
  worker gets SIGKILL from the kernel as its parent ends (``PR_SET_PDEATHSIG``), its sandboxes die
  with it; results written so far stay, ``--resume`` runs the rest.
* A worker dies mid-run: its running tasks are not saved and not retried in this run (a task that
  kills its worker would kill the next one too); the other workers go on with every task left,
  then the run stops with :class:`~vtb_agents.runner.dispatch.WorkerLost` (``vtb run``: status 2)
  naming the worker, how it died and its lost tasks, which ``--resume`` runs. A worker that cannot
  start fails the run at once.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable
from contextlib import ExitStack
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import TYPE_CHECKING, Any

from vtb_agents.rundir.errors import RunError

if TYPE_CHECKING:  # the runner loads in run(), the worker's libraries in serve(): see the module's docstring
    from vtb_agents.runner.dispatch import Finished
    from vtb_agents.runner.shared_limiters import LimiterServer
    from vtb_agents.runner.executors import RunJob, Sink, TaskEpoch

_log = logging.getLogger(__name__)
WORKER_MODULE = "vtb_agents.runner.worker"
"""What a worker runs tasks with: loaded once by the fork server, before it forks the workers."""
TASKS_PER_WORKER = 32
"""The default rule: one worker process per this many tasks run at once (``--concurrency``), up to
the cores this process may use; at least one. At 0.5 s per model call and ~14 ms of CPU per call
(BENCHMARKS.md, "Many cores"), 32 tasks keep a process of threads about 0.9 of a core busy:
processes gave nothing at N = 32 and 1.4x the model span's throughput at N = 64."""


def default_workers(concurrency: int, cores: int | None = None) -> int:
    """Worker processes for ``concurrency`` tasks at once when ``--workers`` is not given:
    ``concurrency // TASKS_PER_WORKER``, at least 1, at most ``cores`` (default: the cores this
    process may run on). Below that many tasks per process, a process of threads is not CPU-bound."""
    cores = cores or len(os.sched_getaffinity(0))
    return max(1, min(cores, concurrency // TASKS_PER_WORKER))


def shares(concurrency: int, workers: int) -> list[int]:
    """Tasks at once per worker: ``concurrency`` split over ``workers`` (the first ones take the remainder)."""
    return [concurrency // workers + (i < concurrency % workers) for i in range(workers)]


@dataclass(frozen=True)
class ProcessExecutor:
    """At most ``concurrency`` tasks at once over ``workers`` local processes (None:
    :func:`default_workers`); no more processes than tasks at once or tasks to run."""

    concurrency: int = 1
    workers: int | None = None
    start_timeout_s: float = 300.0
    poll_s: float = field(default=0.5, repr=False)  # how often the driver wakes for Ctrl-C
    _early: list[WorkerProcesses] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from vtb_agents.runner.dispatch import check_sizes

        check_sizes(self.concurrency, self.workers)

    @property
    def in_process(self) -> bool:
        """Never: workers rebuild the run's plan from ``job.plan``'s records in their own processes."""
        return False

    @property
    def count(self) -> int:
        """The worker processes a run of many tasks gets."""
        return min(self.workers or default_workers(self.concurrency), self.concurrency)

    def prestart(self) -> None:
        """Start the worker processes now: they import the libraries while this process gets the run
        ready, and the next :meth:`run` hands them its job. If no run comes, they end with this process."""
        if not self._early:
            self._early.append(WorkerProcesses(self.count).start_soon())

    def run(self, tasks: Iterable[TaskEpoch], job: RunJob, sink: Sink, stop: threading.Event) -> None:
        """Run the tasks in worker processes; results reach ``sink`` here, in the order they finish.

        Setting ``stop`` schedules nothing more: running tasks finish and are written. The first
        error (a task that raised, a worker that died) is raised once every running task has finished.
        """
        from vtb_agents.runner.dispatch import drive
        from vtb_agents.runner.shared_limiters import LimiterServer

        pending = list(tasks)
        early = self._early.pop() if self._early else None
        count = min(self.count, len(pending))
        with early or WorkerProcesses(count).start() as workers, ExitStack() as serving:
            if not pending:  # nothing left (a resumed, finished run)
                workers.clean = True
                return
            registry = job.plan.limiters.own  # the run's budgets, served to every worker
            served = serving.enter_context(LimiterServer(registry)) if registry is not None else None
            workers.begin(job, shares(self.concurrency, count), self.start_timeout_s, served)
            slots = [i for i, share in enumerate(workers.shares) for _ in range(share)]
            errors = drive(pending, slots, workers, sink, stop, self.poll_s)
            workers.clean = True
        if errors:  # every other task has finished and been written before this is raised
            raise errors[0]


class WorkerProcesses:
    """The worker processes of one run (a :class:`~vtb_agents.runner.dispatch.Workers`; a slot is a
    worker's index, once per task it may run at once). Leaving the block ends them: at a clean end
    each finishes and closes its resources; otherwise (an abort) they are terminated."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.shares: list[int] = []
        self.processes: list[BaseProcess] = []
        self.connections: list[Connection] = []
        self.pids: list[int | None] = [None] * count
        self.running: list[dict[int, str]] = [{} for _ in range(count)]  # per worker: sequence -> task id
        self.gone: set[int] = set()
        self.clean = False
        self._numbers = itertools.count()
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None

    def start(self) -> WorkerProcesses:
        """Start the processes (each loads the libraries, then waits for :meth:`begin`)."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([WORKER_MODULE])  # no effect once this process's fork server runs
        try:
            for index in range(self.count):
                here, there = context.Pipe()
                process = context.Process(target=serve, name=f"vtb-worker-{index}", args=(there, index))
                process.start()
                there.close()
                self.processes.append(process)
                self.connections.append(here)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start_soon(self) -> WorkerProcesses:
        """:meth:`start` in a thread: the fork server's first start waits while it loads the libraries,
        and the caller goes on meanwhile; :meth:`begin` waits for it (and raises what it raised)."""
        def start() -> None:
            try:
                self.start()
            except BaseException as exc:  # raised by begin(), in the caller's thread
                self._start_error = exc

        self._starting = threading.Thread(target=start, name="vtb-worker-start", daemon=True)
        self._starting.start()
        return self

    def _started(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        if self._start_error is not None:
            raise self._start_error

    def __enter__(self) -> WorkerProcesses:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._starting is not None:
            self._starting.join()
        for connection in self.connections:  # a worker reads EOF: it finishes and exits
            connection.close()
        for process in self.processes:
            if not self.clean:
                process.terminate()
            process.join(timeout=30 if self.clean else 5)
            if process.exitcode is None:
                process.kill()
                process.join()

    def begin(self, job: RunJob, threads: list[int], timeout: float, limiters: LimiterServer | None = None) -> None:
        """Hand ``job`` to the first ``len(threads)`` workers, each to run up to its number of tasks
        at once (the others end), with the address of the run's ``limiters`` (served here), and return
        once they are up, each having rebuilt the job's plan from its records (what it built is logged);
        a RunError names the first that is not, or that built another plan."""
        from vtb_agents.runner.dispatch import check_built

        self._started()
        self.shares = threads
        for index, connection in enumerate(self.connections):
            if index >= len(threads):
                connection.close()
                self.gone.add(index)
                continue
            try:
                connection.send(("job", dict(os.environ), job.plan.records, str(job.out.resolve()),
                                 str(job.judge_cache.resolve()), threads[index],
                                 (limiters.address, limiters.authkey) if limiters is not None else None))
            except OSError:  # the worker died while loading: reported below, with how it ended
                continue
        waiting = set(range(len(threads)))
        deadline = time.monotonic() + timeout
        while waiting:
            left = deadline - time.monotonic()
            ready = wait([self.connections[i] for i in waiting], timeout=left) if left > 0 else []
            if not ready:
                raise RunError(f"{len(waiting)} worker process(es) did not start within {timeout:g} s")
            for index in [i for i in waiting if self.connections[i] in ready]:
                try:
                    _, pid, error, built = self.connections[index].recv()
                except EOFError:
                    self.processes[index].join(timeout=5)
                    raise RunError(f"worker process {index} {_death(self.processes[index])} while starting") from None
                if error:
                    raise RunError(f"worker process {index} could not start: {error}")
                check_built(f"worker process {index}", built, job.plan.built)
                _log.info("worker process %d: pid %d, %s", index, pid, built)
                self.pids[index] = pid
                waiting.discard(index)

    def submit(self, slot: int, task: TaskEpoch) -> bool:
        """Send ``task`` to worker ``slot``; False if that worker is gone."""
        from vtb_agents.runner.dispatch import task_label

        if slot in self.gone:
            return False
        number = next(self._numbers)
        try:
            self.connections[slot].send(("run", number, task))
        except OSError:  # the worker died; finished() reports its running tasks
            return False
        self.running[slot][number] = task_label(task)
        return True

    def finished(self, timeout: float) -> list[Finished[int]]:
        """The tasks that ended within ``timeout``: a result line, a task's error, or lost with its worker."""
        live = [i for i in range(len(self.processes)) if i not in self.gone]
        handles: dict[Any, int] = {}
        for index in live:
            handles[self.connections[index]] = index
            handles[self.processes[index].sentinel] = index
        ready = wait(list(handles), timeout=timeout)
        done: list[Finished[int]] = []
        for index in sorted({handles[handle] for handle in ready}):
            done += self._receive(index)
        return done

    def _receive(self, index: int) -> list[Finished[int]]:
        from vtb_agents.runner.dispatch import Finished, WorkerLost
        from vtb_agents.runner.worker import task_failure

        done: list[Finished[int]] = []
        connection, running = self.connections[index], self.running[index]
        try:
            while connection.poll():
                kind, number, *rest = connection.recv()
                task_id = running.pop(number)
                if kind == "done":
                    done.append(Finished(index, line=rest[0]))
                else:
                    done.append(Finished(index, error=task_failure(f"task {task_id} in worker process {index}",
                                                                   *rest)))
            if self.processes[index].is_alive():
                return done
        except (EOFError, OSError):  # the worker is gone: what it sent before is above
            pass
        process = self.processes[index]
        process.join(timeout=5)
        self.gone.add(index)
        lost = WorkerLost(f"worker process {index} (pid {self.pids[index]}) {_death(process)} while running "
                          f"task(s) {', '.join(sorted(running.values()))}: they were not saved and run again "
                          "with --resume; the other workers went on with the rest") if running else None
        done += [Finished(index, error=lost, lost=True) for _ in running]
        running.clear()
        return done


def _death(process: BaseProcess) -> str:
    """How ``process`` ended, in words."""
    code = process.exitcode
    if code is None:
        return "closed its connection"
    if code < 0:
        return f"was killed by signal {signal.Signals(-code).name}"
    return f"exited with status {code}"


# ---------------------------------------------------------------- in the worker process

def die_with_parent(name: str) -> None:
    """PR_SET_PDEATHSIG: the kernel sends SIGKILL to this process when its parent ends, however it
    ends (the fork server, which ends when the ``vtb`` process does); exit at once if it has ended
    already. PR_SET_NAME: ``name`` is what ``ps``, ``top`` and ``/proc/PID/comm`` show for it."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # 1 = PR_SET_PDEATHSIG
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)
    libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # 15 = PR_SET_NAME; cosmetic if refused


def serve(connection: Connection, index: int) -> None:
    """A worker process: take the job (the run's environment, the records of its plan, run directory
    and verdict cache, and how many tasks at once), rebuild the plan and open the run's resources
    (:class:`~vtb_agents.runner.worker.TaskWorker`), say ready and what it built, then run each task
    sent, in threads, and send back its result line; end when the parent closes the connection."""
    die_with_parent(f"vtb-worker-{index}")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    from vtb_agents.runner.shared_limiters import RemoteBudgets
    from vtb_agents.runner.worker import TaskWorker, failure_record  # preloaded by the fork server

    try:
        _, environment, records, out, judge_cache, threads, limiters = connection.recv()
    except EOFError:  # not needed after all
        return
    os.environ.clear()  # the parent's as the run begins (the fork server's dates from its start)
    os.environ.update(environment)
    worker = TaskWorker(records, out, judge_cache, index, RemoteBudgets(*limiters) if limiters else None)
    lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with lock:
            connection.send(message)

    def run(number: int, task: TaskEpoch) -> None:
        try:
            message: tuple[Any, ...] = ("done", number, worker.run(task))
        except Exception as exc:  # sent to the driver, which raises it once the run's other tasks are done
            message = ("failed", number, *failure_record(exc))
        send(message)

    send(("ready", *worker.ready()))
    if worker.error is not None:
        return
    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vtb-task") as pool:
            while True:
                try:
                    _, number, task = connection.recv()
                except EOFError:  # the run is over (or the parent is gone): finish what runs
                    break
                pool.submit(run, number, task)
    finally:
        worker.close()
