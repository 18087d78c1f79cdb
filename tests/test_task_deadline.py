"""--task-timeout: checked at every LangChain step, inside our graphs and users' agents, and it stops
code that is running when the limit passes (instead of letting it run to its own 60 s limit)."""

from __future__ import annotations

import itertools

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManager
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from vtb_agents.config import EpisodeSettings
from vtb_agents.episodes.driver import run_episode
from vtb_agents.models.deadline import TaskDeadline, TaskTimeout, with_deadline
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.sandbox import SandboxError, open_sandbox
from vtb_agents.strategies.agent import agent_strategy
from vtb_agents.tasks import load_tasks
from vtb_agents.tools import select_tools

# Each test would take at least 60 s (the code call's own limit) if the deadline did not stop it.
pytestmark = pytest.mark.timeout(45)
HANG = "while True:\n    pass"
_ids = itertools.count()


def code_call(tool: str, code: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": {"code": code}, "id": f"c{next(_ids)}",
                                      "type": "tool_call"}])


def test_our_graph_stops_hanging_code_and_closes_the_sandbox(task_root, artifacts):
    task = load_tasks(task_root)[0]
    model = ScriptedChatModel(script=lambda messages: code_call("python_interpreter", HANG))
    with open_sandbox("local") as sandbox:
        with pytest.raises(TaskTimeout, match="time limit of 1 s"):
            run_episode(task, model, select_tools(), sandbox=sandbox, artifacts=artifacts,
                        model_name="hang", settings=EpisodeSettings(task_timeout_s=1.0))
        with pytest.raises(SandboxError, match="closed"):
            sandbox.run("print(1)")
    assert len(model.calls) == 1  # the model was not asked again after the limit


def test_user_agent_run_is_stopped_by_the_task_timeout(task_root, tmp_path, monkeypatch):
    module = tmp_path / "hanging_agent.py"
    module.write_text(
        "from langchain.agents import create_agent\n"
        "from langchain_core.messages import AIMessage\n"
        "from vtb_agents.models.scripted import ScriptedChatModel\n\n"
        "def build(tools):\n"
        "    hang = AIMessage('', tool_calls=[{'name': 'python_interpreter', 'id': 'h1',\n"
        "                                     'args': {'code': 'while True:\\n    pass'}}])\n"
        "    return create_agent(ScriptedChatModel(replies=[hang]), tools)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = RunConfig(model="agent:hanging_agent:build", episode=EpisodeSettings(task_timeout_s=1.0))
    summary = run_suite(load_tasks(task_root), config, tmp_path / "run")
    (result,) = ResultsStore(tmp_path / "run").load()[0]
    assert result.episode.status == "error"
    assert result.episode.error is not None and result.episode.error.startswith("TaskTimeout: ")
    assert "time limit of 1 s" in result.episode.error
    # a timeout is the model's doing: graded (its unanswered turn fails its rubrics), in the denominator
    assert result.outcome == "task_timeout" and result.grade.graded and result.grade.passed is False
    assert summary.ungraded == 0 and summary.graded == 1 and summary.complete is True
    assert summary.outcomes == {"task_timeout": 1}


def test_user_agent_that_keeps_calling_tools_stops_at_its_next_step(task_root, artifacts):
    task = load_tasks(task_root)[0]
    model = ScriptedChatModel(script=lambda messages: code_call("python_interpreter",
                                                                "import time\ntime.sleep(0.2)"))
    with open_sandbox("local") as sandbox, pytest.raises(TaskTimeout, match="time limit of 0.8 s"):
        run_episode(task, None, select_tools(), sandbox=sandbox, artifacts=artifacts, model_name="loop",
                    settings=EpisodeSettings(task_timeout_s=0.8),
                    strategy=agent_strategy(lambda ts: create_agent(model, ts), "loop"))
    assert 2 <= len(model.calls) < 40  # it ran a few rounds, then stopped at a step boundary


def test_deadline_raises_only_after_its_time_and_only_in_callbacks_lists():
    with pytest.raises(ValueError, match="positive"):
        TaskDeadline(0)
    deadline = TaskDeadline(3600)
    assert not deadline.expired
    assert RunnableLambda(lambda x: x + 1).invoke(1, with_deadline({}, deadline)) == 2
    expired = TaskDeadline(1e-9)
    with pytest.raises(TaskTimeout, match="time limit"):
        RunnableLambda(lambda x: x + 1).invoke(1, with_deadline({"callbacks": []}, expired))
    assert with_deadline({"tags": ["a"]}, None) == {"tags": ["a"]}
    with pytest.raises(TypeError, match="list of handlers"):
        with_deadline({"callbacks": CallbackManager([])}, deadline)


def test_the_timeout_is_reported_once_not_also_as_a_callback_warning(caplog):
    with caplog.at_level("WARNING"), pytest.raises(TaskTimeout):
        RunnableLambda(lambda x: x).invoke(1, {"callbacks": [TaskDeadline(1e-9)]})
    assert not [r for r in caplog.records if "TaskDeadline" in r.getMessage()]
