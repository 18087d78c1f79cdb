"""Ray executor: a run's tasks spread over Ray actors, one per node by default, each running many at once.

The ``work`` closure that ``run_suite`` hands a local executor holds the run's SQLite checkpointer,
judge cache and models, which cannot cross processes. ``RayExecutor.run`` ships what a
worker needs to rebuild them instead: the ``RunConfig``, the run directory and the judge-cache path.
Each ``TaskWorker`` actor builds its resources once, with its own checkpoint database
``OUT/checkpoints-{i}.sqlite`` (no two processes write one checkpoint file) and its own connection
to the shared judge cache (SQLite WAL: one writer at a time, the others wait up to a busy timeout),
and runs up to its share of ``concurrency`` tasks at once in threads (a threaded actor,
``max_concurrency``), as the local executor does in one process: a task mostly waits on its model,
so one process per node holds many tasks, and a run starts one interpreter (importing LangChain,
LangGraph and the rest once) per node rather than one per task slot. Actors are placed one per node
that has CPUs (node affinity, soft: Ray places an actor elsewhere if its node is gone), round-robin
when ``workers`` asks for more. Results come back as ``results.jsonl`` lines and reach ``sink`` in
the caller's thread, in finish order; ``vtb -v`` logs where each worker runs and how many tasks it ran.

What workers need:

* The same paths: the run directory, the task files and the judge cache. On a local instance they
  are; on a cluster the run directory and the task files must be on storage every node shares. A
  worker refuses to start if it cannot see ``OUT/run.json`` or cannot write ``OUT/artifacts``. The
  judge cache (SQLite WAL) can be shared by the processes of one host only, never across machines
  on a network filesystem: on several machines its path is best on each node's local disk (every
  node then keeps its own cache there; README "Running on a Ray cluster").
* The environment: a local instance started by ``ray.init`` here gives its workers this process's
  environment as it is at start (API keys for ``provider:model`` specs, ``PYTHONPATH``). A
  cluster's workers have the environment of ``ray start``: pass keys with
  ``init_kwargs={"runtime_env": {"env_vars": {...}}}``.
* For ``agent:module:function``: the module, importable by workers. Their ``sys.path`` holds
  ``PYTHONPATH`` and the driver's working directory, not what the driver added to its own
  ``sys.path``; on a cluster ship it with ``runtime_env={"working_dir": ...}`` or ``"py_modules"``.
* The sandbox: code runs on the worker's node, so ``bwrap`` must be installed there.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import threading
from collections import deque
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from vtb_agents.results import TaskResult
from vtb_agents.rundir.layout import ARTIFACTS_DIR, RUN_FILE, worker_checkpoints
from vtb_agents.config import RunConfig
from vtb_agents.runner.executors import RunJob, Sink, TaskEpoch
from vtb_agents.runner.resources import RunResources, open_resources
from vtb_agents.runner.run import RunError, run_task

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("the Ray executor needs Ray: pip install 'vtb-agents[ray]'") from exc

_log = logging.getLogger(__name__)


def check_writable(root: Path) -> None:
    """Raise a RunError unless this process can create ``root`` and write in it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as exc:
        raise RunError(f"a worker on {socket.gethostname()} cannot write {root} ({exc}): the run directory "
                       "must be writable by every Ray worker (shared storage on a cluster)") from exc


@dataclass(frozen=True)
class WorkerState:
    """Where a worker runs (process, Ray node, host) and why it did not start, if it did not."""

    pid: int
    node_id: str
    host: str
    error: str | None


class TaskWorker:
    """One process's share of a run: resources built once, then tasks, several at once in threads.

    Start-up failures are kept (not raised) so that ``ready`` can report them to the driver.
    """

    def __init__(self, config: RunConfig, out: str, judge_cache: str, index: int) -> None:
        self.config, self.index = config, index
        self.resources: RunResources | None = None
        self.error: str | None = None
        self._open = ExitStack()
        try:
            self.resources = self._open.enter_context(self._resources(Path(out), Path(judge_cache)))
        except Exception as exc:  # reported by ready()
            self.error = f"{type(exc).__name__}: {exc}"

    def _resources(self, out: Path, judge_cache: Path) -> AbstractContextManager[RunResources]:
        if not (out / RUN_FILE).is_file():
            raise RunError(f"{out / RUN_FILE} is not visible on {socket.gethostname()}: the run directory "
                           "must be on storage every Ray worker shares")
        check_writable(out / ARTIFACTS_DIR)
        return open_resources(self.config, artifacts=out / ARTIFACTS_DIR, judge_cache=judge_cache,
                              checkpoints=out / worker_checkpoints(self.index), run_dir=out)

    def ready(self) -> WorkerState:
        """Where this worker runs, and its start-up error (None once it can run tasks)."""
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
        return WorkerState(os.getpid(), node, socket.gethostname(), self.error)

    def run(self, item: TaskEpoch) -> str:
        """Run and grade one episode; its ``results.jsonl`` line (validated again by the driver)."""
        if self.resources is None:
            raise RunError(f"worker {self.index} did not start: {self.error}")
        return run_task(item.task, self.config, self.resources, epoch=item.epoch).model_dump_json()

    def close(self) -> None:
        """Close the worker's resources (checkpoint database, judge cache)."""
        self._open.close()


def task_nodes() -> list[str]:
    """The ids of the alive Ray nodes that can run tasks (with CPUs: a head started with ``--num-cpus=0``,
    as KubeRay advises, is left out), in Ray's order."""
    return [node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU", 0) > 0]


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal positive counts, larger first (``parts`` <= ``total``)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass
class _Worker:
    """The driver's view of one actor: its free task slots, and whether it is still alive."""

    index: int
    actor: Any
    free: int
    state: WorkerState | None = None
    ran: int = 0
    alive: bool = True


@dataclass(frozen=True)
class RayExecutor:
    """At most ``concurrency`` tasks at once over ``TaskWorker`` actors on a Ray instance.

    ``workers`` actors (None: one per node with CPUs, at most ``concurrency``) share the
    ``concurrency`` task slots, each running its share in threads. ``address`` is passed to
    ``ray.init`` (None: a new local instance, or ``RAY_ADDRESS``); Ray is started only if this
    process has not initialised it, and then shut down at the end.
    """

    address: str | None = None
    concurrency: int = 2
    workers: int | None = None
    init_kwargs: dict[str, Any] | None = None
    start_timeout_s: float = 300.0
    poll_s: float = field(default=0.5, repr=False)  # how often the driver wakes for Ctrl-C

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")

    @property
    def in_process(self) -> bool:
        """Never: workers rebuild the run's resources from ``job.config`` in their own processes."""
        return False

    def run(self, tasks: Iterable[TaskEpoch], job: RunJob, sink: Sink, stop: threading.Event) -> None:
        """Run the tasks on Ray workers; results reach ``sink`` here, in the order they finish.

        Setting ``stop`` schedules nothing more: running tasks finish and are written. The first
        task error is raised once every running task has finished.
        """
        pending = deque(tasks)
        if not pending:  # nothing left (a resumed, finished run): no need for Ray
            return
        started = not ray.is_initialized()
        if started:
            defaults = {} if self.address else {"include_dashboard": False, "log_to_driver": False}
            ray.init(address=self.address, **{**defaults, **(self.init_kwargs or {})})
        workers: list[_Worker] = []
        inflight: dict[Any, _Worker] = {}
        up = False
        try:
            workers = self._start(job)
            up = self._check_started(workers)
            self._drive(pending, workers, inflight, sink, stop)
        finally:
            if up and not inflight:  # a clean end (an abort kills running tasks at once)
                try:
                    ray.get([w.actor.close.remote() for w in workers if w.alive], timeout=30)
                except (RayError, GetTimeoutError):
                    pass
                for worker in workers:
                    _log.info("Ray worker %d (node %s): %d task(s)", worker.index,
                              worker.state.node_id if worker.state else "?", worker.ran)
            for worker in workers:
                ray.kill(worker.actor)
            if started:
                ray.shutdown()

    def _start(self, job: RunJob) -> list[_Worker]:
        """Create the actors, one per task node (round-robin if ``workers`` asks for more)."""
        nodes = task_nodes()
        count = min(self.concurrency, self.workers or len(nodes) or 1)
        remote = ray.remote(TaskWorker)
        workers = []
        for index, slots in enumerate(shares(self.concurrency, count)):
            placement = (NodeAffinitySchedulingStrategy(nodes[index % len(nodes)], soft=True) if nodes
                         else "DEFAULT")
            actor = remote.options(max_concurrency=slots, scheduling_strategy=placement).remote(
                job.config, str(job.out.resolve()), str(job.judge_cache.resolve()), index)
            workers.append(_Worker(index, actor, slots))
        return workers

    def _check_started(self, workers: list[_Worker]) -> bool:
        """True once every worker is up (each logged with its node); a RunError naming the first that is not."""
        try:
            states = ray.get([w.actor.ready.remote() for w in workers], timeout=self.start_timeout_s)
        except GetTimeoutError as exc:
            raise RunError(f"{len(workers)} Ray worker(s) did not start within {self.start_timeout_s:g} s: "
                           "has the Ray cluster free CPUs?") from exc
        except RayError as exc:
            raise RunError(f"a Ray worker died while starting: {exc}") from exc
        for worker, state in zip(workers, states):
            if state.error:
                raise RunError(f"Ray worker {worker.index} could not start: {state.error} (workers import from "
                               "PYTHONPATH and the driver's working directory: see vtb_agents.runner.ray_executor)")
            worker.state = state
            _log.info("Ray worker %d: node %s (%s), pid %d, %d task(s) at once", worker.index, state.node_id,
                      state.host, state.pid, worker.free)
        _log.info("Ray: %d worker(s) on %d node(s)", len(workers), len({state.node_id for state in states}))
        return True

    def _drive(self, pending: deque[TaskEpoch], workers: list[_Worker], inflight: dict[Any, _Worker], sink: Sink,
               stop: threading.Event) -> None:
        errors: list[BaseException] = []
        while True:
            while pending and not stop.is_set():
                worker = max((w for w in workers if w.alive), key=lambda w: w.free, default=None)
                if worker is None or worker.free == 0:
                    break
                item = pending.popleft()
                worker.free -= 1
                inflight[worker.actor.run.remote(item)] = worker
                _log.debug("task %s (epoch %d): Ray worker %d", item.task.id, item.epoch, worker.index)
            if not inflight:
                break
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=self.poll_s)
            for ref in ready:
                worker = inflight.pop(ref)
                worker.free += 1
                try:
                    line = ray.get(ref)
                except RayActorError as exc:  # the process died: its tasks are left for --resume
                    worker.alive = False
                    errors.append(exc)
                    continue
                except Exception as exc:  # run_task raised: the worker is still usable
                    errors.append(exc)
                    continue
                worker.ran += 1
                try:
                    sink(TaskResult.model_validate_json(line))
                except Exception as exc:
                    errors.append(exc)
        if errors:  # every other task has finished and been written before this is raised
            raise errors[0]
