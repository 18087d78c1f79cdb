"""The Ray executor on a local Ray instance: same results as local runs, stop and resume, clear errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import ray
from conftest import write_task  # noqa: E402

from vtb_agents.judges.base import Judgement  # noqa: E402
from vtb_agents.rundir.store import ResultsStore  # noqa: E402
from vtb_agents.config import RunConfig  # noqa: E402
from vtb_agents.runner.executors import LocalExecutor  # noqa: E402
from vtb_agents.runner.ray_executor import RayExecutor  # noqa: E402
from vtb_agents.runner.plan import plan_records  # noqa: E402
from vtb_agents.runner.resources import open_judge  # noqa: E402
from vtb_agents.runner.run import RunError, run_suite  # noqa: E402
from vtb_agents.rundir.transcripts import read_transcript  # noqa: E402
from vtb_agents.runner.worker import TaskWorker  # noqa: E402
from vtb_agents.tasks import load_tasks  # noqa: E402

PID_AGENT = '''
import os
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

def build(tools):
    return RunnableLambda(
        lambda state: {"messages": [*state["messages"], AIMessage(f"pid={os.getpid()}; The number is 42.")]})
'''
IDS = [f"t{i}" for i in range(6)]


class StubJudge:
    name = "stub:judge"
    calls_model = True  # stands for a model judge: behind the verdict cache

    def judge(self, **kwargs: object) -> Judgement:
        return Judgement("met", "ok")


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``pid_agent.py``, on the workers' PYTHONPATH (set before Ray starts)."""
    folder = tmp_path_factory.mktemp("agents")
    (folder / "pid_agent.py").write_text(PID_AGENT)
    return folder


@pytest.fixture(scope="module", autouse=True)
def local_ray(agent_dir: Path):
    """One local Ray instance for the module; workers import the agent module and this test file."""
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(agent_dir), str(Path(__file__).parent), previous]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()
    if previous is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = previous


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tasks")
    for task_id in IDS:
        write_task(root, task_id)
    return load_tasks(root)


@pytest.fixture
def pid_agent(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(agent_dir))  # the driver resolves the spec too
    return "agent:pid_agent:build"


@pytest.mark.slow
def test_ray_run_matches_a_local_run_and_workers_write_artifacts(tasks, tmp_path):
    config = RunConfig(model="replay")
    remote = run_suite(tasks, config, tmp_path / "ray", executor=RayExecutor(concurrency=3, workers=2))
    local = run_suite(tasks, config, tmp_path / "local", executor=LocalExecutor(3))
    assert remote.model_dump(exclude={"run_dir"}) == local.model_dump(exclude={"run_dir"}) and remote.complete is True
    results, _ = ResultsStore(tmp_path / "ray").load()
    assert sorted(r.task_id for r in results) == IDS
    images = [image for r in results for call in r.episode.tool_calls for image in call.images]
    assert images, "the replayed trajectory makes transformed images"
    assert all((tmp_path / "ray" / "artifacts" / i.ref[:2] / f"{i.ref}.img").is_file() for i in images)
    assert sorted(p.name for p in (tmp_path / "ray").glob("checkpoints-*.sqlite")) == [
        "checkpoints-0.sqlite", "checkpoints-1.sqlite"]  # one per worker, not per task slot
    for task_id in IDS:  # workers write each task's transcript into the shared run directory, as a local run does
        on_ray, on_local = (read_transcript(tmp_path / where, task_id) for where in ("ray", "local"))
        assert [(e.kind, e.step) for e in on_ray.events] == [(e.kind, e.step) for e in on_local.events]
        assert [e.messages for e in on_ray.of_kind("model")] == [e.messages for e in on_local.of_kind("model")]
        assert on_ray.of_kind("model") and on_ray.of_kind("tool")


@pytest.mark.slow
def test_stop_then_resume_on_ray_workers(tasks, pid_agent, tmp_path):
    config, out = RunConfig(model=pid_agent), tmp_path / "run"
    stop = threading.Event()
    partial = run_suite(tasks, config, out, executor=RayExecutor(concurrency=2), stop=stop,
                        progress=lambda result, done, total: stop.set())
    assert partial.complete is False and partial.tasks == 2  # the two running when stop was set
    resumed = run_suite(tasks, config, out, resume=True, executor=RayExecutor(concurrency=2))
    assert resumed.complete is True and resumed.apr == 1.0
    results, _ = ResultsStore(out).load()
    assert sorted(r.task_id for r in results) == IDS
    pids = {int(r.episode.turns[0].answer.split(";")[0].removeprefix("pid=")) for r in results}
    assert os.getpid() not in pids and len(pids) == 2  # one actor per run (one node), none of them this process
    assert run_suite(tasks, config, out, resume=True, executor=RayExecutor(concurrency=2)) == resumed  # no work left


@pytest.mark.slow
def test_a_worker_that_cannot_import_the_agent_says_so(tasks, tmp_path, monkeypatch):
    (tmp_path / "driver_only_agent.py").write_text(PID_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))  # importable here, not on the workers' PYTHONPATH
    with pytest.raises(RunError, match=r"Ray worker \d could not start: ValueError: agent spec .*driver_only_agent"
                                       r".*No module named 'driver_only_agent'.*PYTHONPATH"):
        run_suite(tasks, RunConfig(model="agent:driver_only_agent:build"), tmp_path / "run",
                  executor=RayExecutor(concurrency=2))
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_a_worker_refuses_a_run_directory_it_cannot_see(tmp_path):
    records = plan_records(RunConfig(model="replay"))
    worker = TaskWorker(records, str(tmp_path / "elsewhere"), str(tmp_path / "cache.sqlite"), 0)
    assert worker.error is not None and "must be on storage every worker process shares" in worker.error
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    (tmp_path / "run" / "artifacts").write_text("a file where the folder should be")
    worker = TaskWorker(records, str(tmp_path / "run"), str(tmp_path / "cache.sqlite"), 0)
    assert worker.error is not None
    assert "cannot write" in worker.error and "writable by every worker process" in worker.error


@ray.remote
def _fill_cache(path: str, worker: int, n: int) -> int:
    with open_judge(StubJudge(), Path(path)) as judge:  # type: ignore[arg-type]
        for i in range(n):
            judge.cache.put(f"{worker}-{i}", judge.name, Judgement("met", "x" * 100))  # type: ignore[attr-defined]
        return judge.cache._db.one("PRAGMA busy_timeout")[0]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_workers_share_the_judge_cache_without_lock_errors(tmp_path):
    path = tmp_path / "judge_cache.sqlite"
    timeouts = ray.get([_fill_cache.remote(str(path), w, 300) for w in range(2)])
    assert timeouts == [30_000, 30_000]
    with open_judge(StubJudge(), path) as judge:  # type: ignore[arg-type]
        assert judge.cache._db.one("SELECT COUNT(*) FROM verdicts")[0] == 600  # type: ignore[attr-defined]
        assert judge.cache._db.one("PRAGMA journal_mode")[0] == "wal"  # type: ignore[attr-defined]
