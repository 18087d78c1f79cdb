"""Ray executor: a run's tasks spread over Ray actors, each with resources of its own.

The ``work`` closure that ``run_suite`` hands a local executor holds the run's SQLite checkpointer,
judge cache and models, which cannot cross processes. ``RayExecutor.run`` ships what a
worker needs to rebuild them instead: the ``RunConfig``, the run directory and the judge-cache path.
Each actor is a :class:`~vtb_agents.runner.worker.TaskWorker` (shared with the local process
executor): it builds its resources once, with its own checkpoint database
``OUT/checkpoints-{i}.sqlite`` (no two processes write one checkpoint file) and its own connection
to the shared judge cache (SQLite WAL: one writer at a time, the others wait up to a busy timeout).
Tasks go to free actors and results come back as ``results.jsonl`` lines through the shared driver
loop (``runner/dispatch.py``), reaching ``sink`` in the caller's thread, in finish order.

What workers need:

* The same paths: the run directory, the task files and the judge cache. On a local instance they
  are; on a cluster they must be on storage every node shares (SQLite WAL needs working file locks:
  no NFS for the judge cache). A worker refuses to start if it cannot see ``OUT/run.json`` or
  cannot write ``OUT/artifacts``.
* The environment: a local instance started by ``ray.init`` here gives its workers this process's
  environment as it is at start (API keys for ``provider:model`` specs, ``PYTHONPATH``). A
  cluster's workers have the environment of ``ray start``: pass keys with
  ``init_kwargs={"runtime_env": {"env_vars": {...}}}``.
* For ``agent:module:function``: the module, importable by workers. Their ``sys.path`` holds
  ``PYTHONPATH`` and the driver's working directory, not what the driver added to its own
  ``sys.path``; on a cluster ship it with ``runtime_env={"working_dir": ...}`` or ``"py_modules"``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vtb_agents.runner.dispatch import Finished, WorkerLost, drive, task_label
from vtb_agents.runner.executors import RunJob, Sink, TaskEpoch
from vtb_agents.runner.run import RunError
from vtb_agents.runner.worker import TaskWorker

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("the Ray executor needs Ray: pip install 'vtb-agents[ray]'") from exc


class RayWorkers:
    """The :class:`~vtb_agents.runner.dispatch.Workers` of a run on Ray: one slot per actor."""

    def __init__(self) -> None:
        self.running: dict[Any, tuple[Any, str]] = {}  # object ref -> (actor, task id)

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
    """At most ``concurrency`` tasks at once, one per ``TaskWorker`` actor, on a Ray instance.

    ``address`` is passed to ``ray.init`` (None: a new local instance, or ``RAY_ADDRESS``); Ray is
    started only if this process has not initialised it, and then shut down at the end.
    """

    address: str | None = None
    concurrency: int = 2
    init_kwargs: dict[str, Any] | None = None
    start_timeout_s: float = 300.0
    poll_s: float = field(default=0.5, repr=False)  # how often the driver wakes for Ctrl-C

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")

    @property
    def in_process(self) -> bool:
        """Never: workers rebuild the run's resources from ``job.config`` in their own processes."""
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
        workers = RayWorkers()
        up = False
        try:
            worker = ray.remote(TaskWorker)
            actors = [worker.remote(job.config, str(job.out.resolve()), str(job.judge_cache.resolve()), i)
                      for i in range(self.concurrency)]
            up = self._check_started(actors)
            errors = drive(pending, actors, workers, sink, stop, self.poll_s)
        finally:
            if up and not workers.running:  # a clean end (an abort kills running tasks at once)
                try:
                    ray.get([a.close.remote() for a in actors], timeout=30)
                except (RayError, GetTimeoutError):
                    pass
            for actor in actors:
                ray.kill(actor)
            if started:
                ray.shutdown()
        if errors:  # every other task has finished and been written before this is raised
            raise errors[0]

    def _check_started(self, actors: list[Any]) -> bool:
        """True once every worker is up; a RunError naming the first that is not."""
        try:
            states = ray.get([a.ready.remote() for a in actors], timeout=self.start_timeout_s)
        except GetTimeoutError as exc:
            raise RunError(f"{len(actors)} Ray worker(s) did not start within {self.start_timeout_s:g} s: "
                           "has the Ray cluster free CPUs?") from exc
        except RayError as exc:
            raise RunError(f"a Ray worker died while starting: {exc}") from exc
        for index, (_, error) in enumerate(states):
            if error:
                raise RunError(f"Ray worker {index} could not start: {error} (workers import from PYTHONPATH and "
                               "the driver's working directory: see vtb_agents.runner.ray_executor)")
        return True
