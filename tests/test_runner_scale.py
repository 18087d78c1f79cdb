"""Runs at scale: bounded concurrency, clean stop, resume after SIGKILL, timeouts, retries."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import start_vtb, vtb
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from support.together import together

from vtb_agents.config import EpisodeSettings
from vtb_agents.episodes.driver import run_episode
from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.retry import model_retry_policy
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.sandbox import open_sandbox
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.react import build_react_graph
from vtb_agents.tasks import load_tasks
from vtb_agents.tools import select_tools
from vtb_agents.tools.calculator import calculator

SLOW_AGENT = '''
import threading, time
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

LOCK = threading.Lock()
STATE = {"now": 0, "peak": 0}

def build(tools):
    def answer(state):
        with LOCK:
            STATE["now"] += 1
            STATE["peak"] = max(STATE["peak"], STATE["now"])
        time.sleep(0.2)
        with LOCK:
            STATE["now"] -= 1
        return {"messages": [*state["messages"], AIMessage("The number is 42.")]}
    return RunnableLambda(answer)
'''


@pytest.fixture
def many_tasks(tmp_path):
    root = tmp_path / "tasks"
    for i in range(8):
        write_task(root, f"t{i}")
    return root


@pytest.fixture
def slow_agent(tmp_path, monkeypatch):
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import slow_agent

    slow_agent.STATE.update(now=0, peak=0)
    return slow_agent


def test_concurrency_is_bounded_and_every_task_is_written_once(many_tasks, slow_agent, tmp_path):
    summary = run_suite(load_tasks(many_tasks), RunConfig(model="agent:slow_agent:build"), tmp_path / "run",
                        executor=LocalExecutor(concurrency=4))
    assert slow_agent.STATE["peak"] == 4
    results, _ = ResultsStore(tmp_path / "run").load()
    assert sorted(r.task_id for r in results) == [f"t{i}" for i in range(8)]
    assert summary.apr == 1.0 and summary.complete is True


@pytest.mark.slow
def test_stop_finishes_running_tasks_and_resume_completes_the_run(many_tasks, slow_agent, tmp_path):
    tasks, config = load_tasks(many_tasks), RunConfig(model="agent:slow_agent:build")
    stop = threading.Event()
    partial = run_suite(tasks, config, tmp_path / "run", executor=LocalExecutor(2), stop=stop,
                        progress=lambda result, done, total: stop.set())
    assert partial.complete is False and 0 < partial.tasks < 8
    resumed = run_suite(tasks, config, tmp_path / "run", resume=True, executor=LocalExecutor(2))
    straight = run_suite(tasks, config, tmp_path / "straight", executor=LocalExecutor(3))
    assert resumed.model_dump(exclude={"run_dir"}) == straight.model_dump(exclude={"run_dir"})
    results, _ = ResultsStore(tmp_path / "run").load()
    assert sorted(r.task_id for r in results) == [f"t{i}" for i in range(8)]


def start_cli_run(tasks_root: Path, tmp_path: Path, *, after_lines: int, **popen: object):
    """Start `vtb run` on the slow agent in a subprocess; return once ``after_lines`` results exist."""
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    out = tmp_path / "run"
    args = ["run", "--tasks", tasks_root, "--model", "agent:slow_agent:build", "--out", out, "--concurrency", "2"]
    process = start_vtb(*args, path=[tmp_path], **popen)  # this checkout's vtb_agents, then the agent module
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < after_lines):
        time.sleep(0.02)
    return process, args, out


@pytest.mark.slow
def test_sigkill_then_resume_loses_and_duplicates_nothing(many_tasks, tmp_path):
    process, args, out = start_cli_run(many_tasks, tmp_path, after_lines=2, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"

    def kill_and_resume() -> subprocess.CompletedProcess[str]:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        written = len(results.read_text().splitlines())
        assert 2 <= written < 8, "the run should have been killed part way"
        return vtb(*args, "--resume", path=[tmp_path], timeout=120)

    finished, straight = together(  # the uninterrupted run beside it: its own folder, nothing shared
        kill_and_resume, lambda: vtb(*args[:-4], "--out", tmp_path / "straight", path=[tmp_path], timeout=120))
    assert finished.returncode == 0, finished.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(line["task_id"] for line in lines) == [f"t{i}" for i in range(8)]
    loaded, partial = ResultsStore(out).load()
    assert partial is None and len(loaded) == 8 and all(r.grade.passed for r in loaded)
    assert [r.task_id for r in loaded] == [line["task_id"] for line in lines]
    assert straight.returncode == 0, straight.stderr
    assert json.loads((out / "summary.json").read_text()) == json.loads(
        (tmp_path / "straight" / "summary.json").read_text())


def test_task_timeout_stops_at_the_next_model_call(task_root, artifacts):
    task = load_tasks(task_root)[0]

    def slow_calculator_calls(messages):
        time.sleep(0.1)
        return AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "1+1"},
                                          "id": f"c{len(messages)}", "type": "tool_call"}])

    with open_sandbox("local") as sandbox, pytest.raises(TaskTimeout, match="time limit of 0.25 s"):
        run_episode(task, ScriptedChatModel(script=slow_calculator_calls), select_tools(), sandbox=sandbox,
                    artifacts=artifacts, model_name="slow", settings=EpisodeSettings(task_timeout_s=0.25))


@pytest.mark.slow
@pytest.mark.parametrize("failures, status, calls", [(2, 429, 3), (1, 503, 2), (1, 400, 1)])
def test_model_calls_retry_rate_limits_and_server_errors_only(failures, status, calls, artifacts):
    replies = iter([status] * failures + ["fine"])
    with OpenAIServer(lambda body: next(replies)) as server, open_sandbox("local") as sandbox:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)
        graph = build_react_graph(retry_policy=model_retry_policy(initial_interval_s=0.01))
        context = EpisodeContext(model=model, sandbox=sandbox, artifacts=artifacts, system_prompt="s",
                                 tools=[calculator])
        run = lambda: graph.invoke({"messages": [HumanMessage("hi", id="turn-0")]}, context=context)  # noqa: E731
        if status == 400:
            with pytest.raises(Exception, match="scripted failure 400"):
                run()
        else:
            assert run()["messages"][-1].content == "fine"
    assert len(server.requests) == calls


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(many_tasks, tmp_path):
    process, args, out = start_cli_run(many_tasks, tmp_path, after_lines=1, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
    results = out / "results.jsonl"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted:" in stderr and "continue with: vtb run " in stderr
    hint = next(line for line in stderr.splitlines() if "continue with: " in line).split("continue with: ")[1]
    words = shlex.split(hint)  # the printed command, run as printed
    assert words[0] == "vtb" and words[-3:] == ["--out", str(out), "--resume"] and "--concurrency" in words
    lines = results.read_text().splitlines()
    assert 0 < len(lines) < 8 and all(json.loads(line)["grade"]["passed"] for line in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["tasks"] == len(lines)
    finished = vtb(*words[1:], path=[tmp_path], timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert sorted(json.loads(line)["task_id"] for line in results.read_text().splitlines()) == \
        [f"t{i}" for i in range(8)]
