"""The process executor (``--executor processes``): the same results as the thread executor, stop and
resume, a worker that dies, a full disk, and no worker left behind when the parent is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import start_vtb, vtb
from support.together import together

from vtb_agents.rundir.errors import StoppedRun
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.dispatch import WorkerLost
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.process_executor import ProcessExecutor, default_workers, shares
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks

AGENT = '''
import errno, os, signal, time
from pathlib import Path
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

MARKER = Path(__file__).with_name("killed-once")

def build(tools):
    def answer(state):
        prompt = " ".join(str(m.content) for m in state["messages"])
        if "KILL" in prompt and not MARKER.exists():  # the worker running this task dies, once
            MARKER.write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)
        if "FULL" in prompt:
            raise OSError(errno.ENOSPC, "No space left on device")
        time.sleep(0.3)
        return {"messages": [*state["messages"], AIMessage(f"pid={os.getpid()}; The number is 42.")]}
    return RunnableLambda(answer)
'''
IDS = [f"t{i}" for i in range(8)]
PROMPT = "What number is printed in the bottom-right corner?"


def write_tasks(root: Path, marked: dict[str, str] | None = None) -> Path:
    """Eight small tasks; ``marked`` appends a word to some prompts (KILL, FULL) that the agent acts on."""
    for task_id in IDS:
        word = (marked or {}).get(task_id)
        if word:
            write_task(root, task_id)
            task = json.loads((root / task_id / "task.json").read_text())
            task["turns"][0]["prompt"] = f"{PROMPT} {word}"
            (root / task_id / "task.json").write_text(json.dumps(task))
        else:
            write_task(root, task_id)
    return root


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``agent:proc_agent:build``, importable here and (through ``sys.path``) in spawned workers."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "proc_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(folder))
    return "agent:proc_agent:build"


def answers(out: Path) -> dict[str, tuple[str, list[str | None]]]:
    """Per task: its outcome and its turns' answers, from ``results.jsonl``."""
    results, _ = ResultsStore(out).load()
    return {r.task_id: (r.outcome, [t.answer for t in r.episode.turns]) for r in results}


def test_the_default_number_of_workers_follows_the_concurrency_up_to_the_cores() -> None:
    assert [default_workers(n, cores=2) for n in (1, 8, 32, 63, 64, 96, 1204)] == [1, 1, 1, 1, 2, 2, 2]
    assert [default_workers(n, cores=8) for n in (16, 64, 100, 128, 256, 1024)] == [1, 2, 3, 4, 8, 8]
    assert shares(5, 2) == [3, 2] and shares(32, 2) == [16, 16] and shares(3, 3) == [1, 1, 1]


@pytest.mark.slow
def test_processes_give_the_summary_and_answers_of_the_thread_executor_on_the_sample_suite(tmp_path: Path) -> None:
    sample = load_tasks("sample")
    config = RunConfig(model="replay", judge="rule")
    processes, threads = together(  # side by side: two run directories, nothing shared
        lambda: run_suite(sample, config, tmp_path / "processes", executor=ProcessExecutor(4, workers=2)),
        lambda: run_suite(sample, config, tmp_path / "threads", executor=LocalExecutor(4)))
    assert processes.model_dump(exclude={"run_dir"}) == threads.model_dump(exclude={"run_dir"})
    assert processes.complete is True and processes.tasks == len(sample) and processes.apr == 1.0
    assert answers(tmp_path / "processes") == answers(tmp_path / "threads")
    assert len(answers(tmp_path / "processes")) == len(sample)
    assert sorted(p.name for p in (tmp_path / "processes").glob("checkpoints-*.sqlite")) == [
        "checkpoints-0.sqlite", "checkpoints-1.sqlite"]


@pytest.mark.slow
def test_a_worker_that_dies_loses_only_its_running_tasks_which_resume_runs(agent: str, tmp_path: Path) -> None:
    tasks = load_tasks(write_tasks(tmp_path / "tasks", {"t2": "KILL"}))
    config, out = RunConfig(model=agent), tmp_path / "run"
    with pytest.raises(WorkerLost, match=r"worker process [01] \(pid \d+\) was killed by signal SIGKILL while "
                                         r"running task\(s\) (t\d, )?t2(, t\d)?: they were not saved") as lost:
        run_suite(tasks, config, out, executor=ProcessExecutor(4, workers=2))
    named = str(lost.value).split("task(s) ")[1].split(":")[0].split(", ")
    saved = answers(out)
    assert sorted(saved) == sorted(set(IDS) - set(named))  # the other worker went on with every task left
    assert {outcome for outcome, _ in saved.values()} == {"answered"}
    pids = {int(str(turns[0]).split(";")[0].removeprefix("pid=")) for _, turns in saved.values()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # run in the workers, not here
    resumed = run_suite(tasks, config, out, resume=True, executor=ProcessExecutor(4, workers=2))
    assert resumed.complete is True and resumed.tasks == 8 and resumed.apr == 1.0
    lines = [json.loads(line)["task_id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(lines) == IDS  # each task exactly once


def test_a_full_disk_in_a_worker_stops_the_run_and_keeps_what_finished(agent: str, tmp_path: Path) -> None:
    tasks = load_tasks(write_tasks(tmp_path / "tasks", {"t0": "FULL"}))
    with pytest.raises(StoppedRun, match=r"cannot write results: disk full \(No space left on device\) in .*; "
                                         r"3 task\(s\) saved; free space and continue the run with --resume"):
        run_suite(tasks, RunConfig(model=agent), tmp_path / "run", executor=ProcessExecutor(4, workers=2))
    assert sorted(answers(tmp_path / "run")) == ["t1", "t2", "t3"]  # running ones finished; none started after


def test_workers_started_early_take_the_job_and_spare_ones_end(agent: str, tmp_path: Path) -> None:
    tasks = load_tasks(write_tasks(tmp_path / "tasks"))[:1]
    executor = ProcessExecutor(4, workers=2)
    executor.prestart()
    early = executor._early[0]
    summary = run_suite(tasks, RunConfig(model=agent), tmp_path / "run", executor=executor)
    assert summary.complete is True and summary.tasks == 1 and summary.apr == 1.0
    assert [p.exitcode for p in early.processes] == [0, 0] and executor._early == []
    assert [p.name for p in (tmp_path / "run").glob("checkpoints-*.sqlite")] == ["checkpoints-0.sqlite"]


def test_each_task_and_epoch_runs_once_in_the_workers(agent: str, tmp_path: Path) -> None:
    tasks = load_tasks(write_tasks(tmp_path / "tasks"))[:3]
    summary = run_suite(tasks, RunConfig(model=agent, epochs=2), tmp_path / "run",
                        executor=ProcessExecutor(4, workers=2))
    assert summary.complete is True and summary.apr == 1.0
    results, _ = ResultsStore(tmp_path / "run").load()
    assert sorted((r.task_id, r.epoch) for r in results) == [(t, e) for t in ("t0", "t1", "t2") for e in (1, 2)]


def tree(pid: int) -> set[int]:
    """The descendants of ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def left_alive(pids: set[int], within_s: float = 20) -> list[int]:
    """Those of ``pids`` still running after up to ``within_s`` seconds (processes take a moment to exit)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(map(alive, pids)):
        time.sleep(0.05)
    return sorted(pid for pid in pids if alive(pid))


def start_run(tasks: Path, tmp_path: Path, **popen: object) -> tuple[subprocess.Popen[str], list[str | Path], Path]:
    """``vtb run --executor processes --workers 2`` on the agent in a subprocess, once 2 results are written."""
    (tmp_path / "proc_agent.py").write_text(AGENT)
    out = tmp_path / "run"
    args: list[str | Path] = ["run", "--tasks", tasks, "--model", "agent:proc_agent:build", "--out", out,
                              "--concurrency", "2", "--executor", "processes", "--workers", "2"]
    process = start_vtb(*args, path=[tmp_path], text=True, **popen)
    results, deadline = out / "results.jsonl", time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
        time.sleep(0.02)
    return process, args, out


@pytest.mark.slow
def test_sigkill_of_the_parent_leaves_no_worker_and_resume_runs_each_task_once(tmp_path: Path) -> None:
    process, args, out = start_run(write_tasks(tmp_path / "tasks"), tmp_path, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
    workers = tree(process.pid)
    assert len(workers) >= 2  # the two workers, multiprocessing's resource tracker (and whatever they started)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert left_alive(workers) == []
    written = len((out / "results.jsonl").read_text().splitlines())
    assert 2 <= written < 8, "the run should have been killed part way"
    finished = vtb(*args, "--resume", path=[tmp_path], timeout=180)
    assert finished.returncode == 0, finished.stderr
    lines = [json.loads(line)["task_id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(lines) == IDS
    assert json.loads((out / "summary.json").read_text())["apr"] == 1.0
    again = vtb(*args, "--resume", path=[tmp_path], timeout=180)
    assert again.returncode == 0, again.stderr  # nothing left: the workers started early just end
    assert len((out / "results.jsonl").read_text().splitlines()) == 8


@pytest.mark.slow
def test_sigterm_stops_cleanly_with_the_workers(tmp_path: Path) -> None:
    process, args, out = start_run(write_tasks(tmp_path / "tasks"), tmp_path, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE)
    workers = tree(process.pid)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted:" in stderr and "--executor processes --workers 2" in stderr
    assert left_alive(workers) == []
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert 2 <= len(lines) < 8 and all(line["grade"]["passed"] for line in lines)
    assert json.loads((out / "summary.json").read_text())["tasks"] == len(lines)
