"""Ray executor: a run's tasks spread over Ray actors, each with resources of its own.

The ``work`` closure that ``run_suite`` hands a local executor holds the run's SQLite checkpointer,
judge cache and models, which cannot cross processes. ``RayExecutor.run`` ships what a
worker needs to rebuild them instead: the ``RunConfig``, the run directory and the judge-cache path.
Each ``TaskWorker`` actor builds its resources once, with its own checkpoint database
``OUT/checkpoints-{i}.sqlite`` (no two processes write one checkpoint file) and its own connection
to the shared judge cache (SQLite WAL: one writer at a time, the others wait up to a busy timeout).
Results come back as ``results.jsonl`` lines and reach ``sink`` in the caller's thread, in finish order.

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
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("the Ray executor needs Ray: pip install 'vtb-agents[ray]'") from exc

def check_writable(root: Path) -> None:
    """Raise a RunError unless this process can create ``root`` and write in it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as exc:
        raise RunError(f"a worker on {socket.gethostname()} cannot write {root} ({exc}): the run directory "
                       "must be writable by every Ray worker (shared storage on a cluster)") from exc


class TaskWorker:
    """One process's share of a run: resources built once, then one task at a time.

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

    def ready(self) -> tuple[int, str | None]:
        """(process id, start-up error or None)."""
        return os.getpid(), self.error

    def run(self, item: TaskEpoch) -> str:
        """Run and grade one episode; its ``results.jsonl`` line (validated again by the driver)."""
        if self.resources is None:
            raise RunError(f"worker {self.index} did not start: {self.error}")
        return run_task(item.task, self.config, self.resources, epoch=item.epoch).model_dump_json()

    def close(self) -> None:
        """Close the worker's resources (checkpoint database, judge cache)."""
        self._open.close()


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
        pending = deque(tasks)
        if not pending:  # nothing left (a resumed, finished run): no need for Ray
            return
        started = not ray.is_initialized()
        if started:
            defaults = {} if self.address else {"include_dashboard": False, "log_to_driver": False}
            ray.init(address=self.address, **{**defaults, **(self.init_kwargs or {})})
        actors: list[Any] = []
        inflight: dict[Any, Any] = {}
        up = False
        try:
            worker = ray.remote(TaskWorker)
            actors = [worker.remote(job.config, str(job.out.resolve()), str(job.judge_cache.resolve()), i)
                      for i in range(self.concurrency)]
            up = self._check_started(actors)
            self._drive(pending, list(actors), inflight, sink, stop)
        finally:
            if up and not inflight:  # a clean end (an abort kills running tasks at once)
                try:
                    ray.get([a.close.remote() for a in actors], timeout=30)
                except (RayError, GetTimeoutError):
                    pass
            for actor in actors:
                ray.kill(actor)
            if started:
                ray.shutdown()

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

    def _drive(self, pending: deque[TaskEpoch], idle: list[Any], inflight: dict[Any, Any], sink: Sink,
               stop: threading.Event) -> None:
        errors: list[BaseException] = []
        while True:
            while idle and pending and not stop.is_set():
                actor = idle.pop()
                inflight[actor.run.remote(pending.popleft())] = actor
            if not inflight:
                break
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=self.poll_s)
            for ref in ready:
                actor = inflight.pop(ref)
                try:
                    line = ray.get(ref)
                except RayActorError as exc:  # the process died: its task is left for --resume
                    errors.append(exc)
                    continue
                except Exception as exc:  # run_task raised: the worker is still usable
                    errors.append(exc)
                    idle.append(actor)
                    continue
                idle.append(actor)
                try:
                    sink(TaskResult.model_validate_json(line))
                except Exception as exc:
                    errors.append(exc)
        if errors:  # every other task has finished and been written before this is raised
            raise errors[0]
