"""Ray executor: a run's tasks spread over Ray actors, one per node by default, each running many at once.

The ``work`` closure that ``run_suite`` hands a local executor holds the run's SQLite checkpointer,
judge cache and models, which cannot cross processes. ``RayExecutor.run`` ships what a
worker needs to rebuild them instead: the records of the run's plan (:mod:`vtb_agents.runner.plan`),
the run directory and the judge-cache path. Each actor is a
:class:`~vtb_agents.runner.worker.TaskWorker` (shared with the local process executor): it rebuilds
the plan's objects from its records and opens its resources once (a worker that built another plan
than the driver's fails the run before any task), with its own checkpoint database
``OUT/checkpoints-{i}.sqlite`` (no two processes write one checkpoint file) and its own connection
to the shared judge cache (SQLite WAL: one writer at a time, the others wait up to a busy timeout),
and runs up to its share of ``concurrency`` tasks at once in threads (a threaded actor,
``max_concurrency``), as the local executor does in one process: a task mostly waits on its model,
so one process per node holds many tasks, and a run starts one interpreter (importing LangChain,
LangGraph and the rest once) per node rather than one per task slot. Every actor paces its requests
by one named actor holding the run's budgets (:class:`LimitersActor`; its counts join the run's
summary). Actors are placed one per node that has CPUs (node affinity, soft: Ray places an actor
elsewhere if its node is gone), round-robin when ``workers`` asks for more. Tasks go to free slots
and results come back as ``results.jsonl`` lines through the shared driver loop
(``runner/dispatch.py``), reaching ``sink`` in the caller's thread, in finish order; ``vtb -v`` logs
where each worker runs and how many tasks it ran.

What workers need:

* The same paths: the run directory and the task files. On a local instance they are; on a
  cluster they must be on storage every node shares. A worker refuses to start if it cannot see
  ``OUT/run.json`` or cannot write ``OUT/artifacts``. The judge cache (SQLite WAL) can be shared by
  the processes of one host only, never across machines on a network filesystem: on several
  machines its path is best on each node's local disk (every node then keeps its own cache there;
  docs/how-to/ray-cluster.md).
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
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vtb_agents.models.limiter import Caps, Grant, Limiters, LimitKey
from vtb_agents.models.token_estimate import TokenEstimate
from vtb_agents.runner.dispatch import Finished, WorkerLost, check_built, check_sizes, drive, task_label
from vtb_agents.runner.executors import RunJob, Sink, TaskEpoch
from vtb_agents.runner.run import RunError
from vtb_agents.runner.worker import TaskWorker

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("the Ray executor needs Ray: pip install 'vtb-agents[ray]'") from exc

_log = logging.getLogger(__name__)


class LimitersActor:
    """The run's budgets on Ray (a named, threaded actor: an ``acquire`` blocks its caller's thread only):
    every worker, on any node, asks it, so K actors spend one account budget, not K."""

    def __init__(self, caps: Caps) -> None:
        self.limiters = Limiters(caps)

    def acquire(self, key: LimitKey, estimate: TokenEstimate, timeout_s: float | None) -> Grant:
        """:meth:`~vtb_agents.models.limiter.Limiters.acquire`."""
        return self.limiters.acquire(key, estimate, timeout_s)

    def release(self, grant: Grant, status: int | None, headers: dict[str, str]) -> None:
        """:meth:`~vtb_agents.models.limiter.Limiters.release`."""
        self.limiters.release(grant, status, headers)

    def absorbed(self, key: LimitKey) -> None:
        """:meth:`~vtb_agents.models.limiter.Limiters.absorbed`."""
        self.limiters.absorbed(key)

    def summary(self) -> dict[str, Any]:
        """What the actor paced, for the run's summary."""
        return self.limiters.summary()


class RayBudgets:
    """A worker's view of the run's :class:`LimitersActor`, found by its ``name`` (pickled as the name only)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._handle: Any = None

    def __reduce__(self) -> tuple[type[RayBudgets], tuple[str]]:
        return RayBudgets, (self.name,)

    def _actor(self) -> Any:
        if self._handle is None:
            self._handle = ray.get_actor(self.name)
        return self._handle

    def acquire(self, key: LimitKey, estimate: TokenEstimate, timeout_s: float | None) -> Grant:
        """Wait, in the actor, for leave to send one request of ``key``."""
        grant: Grant = ray.get(self._actor().acquire.remote(key, estimate, timeout_s))
        return grant

    def release(self, grant: Grant, status: int | None, headers: dict[str, str]) -> None:
        """Tell the actor the request of ``grant`` ended."""
        ray.get(self._actor().release.remote(grant, status, headers))

    def absorbed(self, key: LimitKey) -> None:
        """Tell the actor a 429 of ``key`` was waited out."""
        ray.get(self._actor().absorbed.remote(key))


LIMITER_CALLS_PER_TASK = 8
"""Calls the limiters' actor serves at once (its threads), per task the run runs at once: a task's
requests in flight or waiting (the judge's fan out); more wait in Ray's queue."""


class RayTaskWorker(TaskWorker):
    """A :class:`~vtb_agents.runner.worker.TaskWorker` that can say which Ray node it runs on."""

    def node(self) -> str:
        """The id of this worker's Ray node (as ``ray status`` and ``ray.nodes()`` name it)."""
        return str(ray.get_runtime_context().get_node_id())


def task_nodes() -> list[str]:
    """The ids of the alive Ray nodes that can run tasks (with CPUs: a head started with ``--num-cpus=0``,
    as KubeRay advises, is left out), in Ray's order."""
    return [node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU", 0) > 0]


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal positive counts, larger first (``parts`` <= ``total``)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def interleaved(actors: list[Any], slots: list[int]) -> list[Any]:
    """One entry per task slot, the actors taking turns (``drive`` fills slots from the end: the first
    tasks go to every actor in turn, not all to one)."""
    return [actor for turn in range(max(slots)) for actor, count in zip(actors, slots) if turn < count]


class RayWorkers:
    """The :class:`~vtb_agents.runner.dispatch.Workers` of a run on Ray: an actor has one slot per task
    it runs at once (its ``max_concurrency``); ``ran`` counts the tasks each actor finished."""

    def __init__(self) -> None:
        self.running: dict[Any, tuple[Any, str]] = {}  # object ref -> (actor, task id)
        self.ran: Counter[Any] = Counter()

    def submit(self, slot: Any, task: TaskEpoch) -> bool:
        """Start ``task`` on the actor ``slot`` (a dead actor shows when its result is fetched)."""
        self.running[slot.run.remote(task)] = (slot, task_label(task))
        return True

    def finished(self, timeout: float) -> list[Finished[Any]]:
        """The tasks that ended within ``timeout``; a task whose actor died is ``lost``, left for --resume."""
        ready, _ = ray.wait(list(self.running), num_returns=1, timeout=timeout)
        done: list[Finished[Any]] = []
        for ref in ready:
            actor, task_id = self.running.pop(ref)
            try:
                done.append(Finished(actor, line=ray.get(ref)))
                self.ran[actor] += 1
            except RayActorError as exc:  # the process died: its task is left for --resume
                lost = WorkerLost(f"a Ray worker died while running task {task_id}: it was not saved and runs "
                                  f"again with --resume ({type(exc).__name__})")
                lost.__cause__ = exc
                done.append(Finished(actor, error=lost, lost=True))
            except Exception as exc:  # run_task raised: the worker is still usable
                done.append(Finished(actor, error=exc))
        return done


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
        check_sizes(self.concurrency, self.workers)

    @property
    def in_process(self) -> bool:
        """Never: workers rebuild the run's plan from ``job.plan``'s records in their own processes."""
        return False

    def run(self, tasks: Iterable[TaskEpoch], job: RunJob, sink: Sink, stop: threading.Event) -> None:
        """Run the tasks on Ray workers; results reach ``sink`` here, in the order they finish.

        Setting ``stop`` schedules nothing more: running tasks finish and are written. The first
        task error is raised once every running task has finished.
        """
        pending = list(tasks)
        if not pending:  # nothing left (a resumed, finished run): no need for Ray
            return
        started = not ray.is_initialized()
        if started:
            defaults = {} if self.address else {"include_dashboard": False, "log_to_driver": False}
            ray.init(address=self.address, **{**defaults, **(self.init_kwargs or {})})
        actors: list[Any] = []
        nodes: list[str] = []
        workers = RayWorkers()
        up = False
        budgets: Any = None
        registry = job.plan.limiters.own  # the run's budgets, which the actor holds for every worker
        try:
            name = f"vtb-limiters-{registry.id}" if registry is not None else None
            if registry is not None:  # named: the workers find it by its name
                calls = max(64, LIMITER_CALLS_PER_TASK * self.concurrency)
                budgets = ray.remote(LimitersActor).options(name=name, max_concurrency=calls).remote(registry.caps)
            actors, slots = self._start(job, RayBudgets(name) if name else None)
            nodes = self._check_started(actors, slots, job.plan.built)
            up = True
            errors = drive(pending, interleaved(actors, slots), workers, sink, stop, self.poll_s)
        finally:
            if up and not workers.running:  # a clean end (an abort kills running tasks at once)
                try:
                    ray.get([a.close.remote() for a in actors], timeout=30)
                except (RayError, GetTimeoutError):
                    pass
                for index, (actor, node) in enumerate(zip(actors, nodes)):
                    _log.info("Ray worker %d (node %s): %d task(s)", index, node, workers.ran[actor])
            for actor in actors:
                ray.kill(actor)
            if budgets is not None and registry is not None:
                try:
                    registry.adopt(ray.get(budgets.summary.remote(), timeout=30))
                finally:
                    ray.kill(budgets)
            if started:
                ray.shutdown()
        if errors:  # every other task has finished and been written before this is raised
            raise errors[0]

    def _start(self, job: RunJob, budgets: RayBudgets | None) -> tuple[list[Any], list[int]]:
        """The actors, one per task node (round-robin if ``workers`` asks for more), and their task slots;
        they pace their requests by ``budgets`` (the run's limiters' actor)."""
        nodes = task_nodes()
        slots = shares(self.concurrency, min(self.concurrency, self.workers or len(nodes) or 1))
        remote = ray.remote(RayTaskWorker)
        actors = []
        for index, count in enumerate(slots):
            placement = NodeAffinitySchedulingStrategy(nodes[index % len(nodes)], soft=True) if nodes else "DEFAULT"
            actors.append(remote.options(max_concurrency=count, scheduling_strategy=placement).remote(
                job.plan.records, str(job.out.resolve()), str(job.judge_cache.resolve()), index, budgets))
        return actors, slots

    def _check_started(self, actors: list[Any], slots: list[int], built: str) -> list[str]:
        """The node of every worker once all are up, each having built the plan ``built`` (each logged);
        a RunError naming the first that is not, or that built another plan."""
        try:
            states = ray.get([a.ready.remote() for a in actors], timeout=self.start_timeout_s)
            nodes = ray.get([a.node.remote() for a in actors], timeout=self.start_timeout_s)
        except GetTimeoutError as exc:
            raise RunError(f"{len(actors)} Ray worker(s) did not start within {self.start_timeout_s:g} s: "
                           "has the Ray cluster free CPUs?") from exc
        except RayError as exc:
            raise RunError(f"a Ray worker died while starting: {exc}") from exc
        for index, (_, error, theirs) in enumerate(states):
            if error:
                raise RunError(f"Ray worker {index} could not start: {error} (workers import from PYTHONPATH and "
                               "the driver's working directory: see vtb_agents.runner.ray_executor)")
            check_built(f"Ray worker {index}", theirs, built)
        for index, ((pid, _, theirs), node, count) in enumerate(zip(states, nodes, slots)):
            _log.info("Ray worker %d: node %s, pid %d, %d task(s) at once, %s", index, node, pid, count, theirs)
        _log.info("Ray: %d worker(s) on %d node(s)", len(actors), len(set(nodes)))
        return list(nodes)
