"""A user's own LangChain agent (create_agent) runs on tasks and is graded through the same path."""

from __future__ import annotations

import json

from langchain_core.messages import HumanMessage, ToolMessage

from vtb_agents.rundir.store import ResultsStore
from vtb_agents.config import run_config
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks

AGENT_MODULE = '''
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from vtb_agents.models.scripted import ScriptedChatModel

CROP = ("from PIL import Image\\nim = Image.open('image_0.png')\\n"
        "im.crop((340, 260, 400, 300)).resize((240, 160)).save('transformed_image_0.png')")
MODELS = []

def build(tools):
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[{"name": "python_image_processing", "args": {"code": CROP}, "id": "c1"}]),
        AIMessage("The number in the corner is 42."),
    ])
    MODELS.append(model)
    return create_agent(model, tools)
'''


def test_create_agent_is_run_and_graded_like_our_graphs(task_root, tmp_path, monkeypatch):
    (tmp_path / "user_agent.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = run_suite(load_tasks(task_root), RunConfig(model="agent:user_agent:build"), tmp_path / "run")
    assert summary.apr == 1.0 and summary.tool_metrics.by_tool == {"python_image_processing": 1}
    (result,) = ResultsStore(tmp_path / "run").load()[0]
    (turn,) = result.episode.turns
    assert turn.answer == "The number in the corner is 42."
    (call,) = turn.tool_calls
    assert call.ok and call.images[0].name == "transformed_image_0.png" and call.images[0].size == [240, 160]
    assert json.loads(call.output)["new_images"] == ["transformed_image_0.png"]
    # The agent's model received the task image as a real image block, and the tools of this build.
    import user_agent

    assert len(user_agent.MODELS) == 2  # the factory is called by the check before the run, then for the episode
    first_request = user_agent.MODELS[-1].calls[0]
    human = next(m for m in first_request if isinstance(m, HumanMessage))
    assert any(b.get("type") == "image" and b["base64"] for b in human.content if isinstance(b, dict))
    names = sorted(t.name for t in user_agent.MODELS[-1].bound_tools)
    assert names == ["browser_get_page_text", "calculator", "historical_weather", "python_image_processing",
                     "python_interpreter", "web_search"]
    second_request = user_agent.MODELS[-1].calls[1]
    assert isinstance(second_request[-1], ToolMessage) and second_request[-1].tool_call_id == "c1"


STUBBORN_MODULE = '''
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from vtb_agents.models.scripted import ScriptedChatModel

MODELS, FAILURES = [], []

def calls_the_calculator(messages):
    return AIMessage(f"try {len(messages)}", tool_calls=[
        {"name": "calculator", "args": {"expression": "6*7"}, "id": f"c{len(messages)}"}])

def build(tools):
    model = ScriptedChatModel(script=calls_the_calculator)
    MODELS.append(model)
    by_name = {t.name: t for t in tools}

    def loop(state):  # a hand-written agent that swallows every error and keeps going
        messages = list(state["messages"])
        for _ in range(8):
            try:
                reply = model.bind_tools(tools).invoke(messages)
                messages.append(reply)
                for call in reply.tool_calls:
                    messages.append(by_name[call["name"]].invoke({**call, "type": "tool_call"}))
            except Exception as exc:
                FAILURES.append(type(exc).__name__)
        return {"messages": messages + [AIMessage("my own answer")]}

    return RunnableLambda(loop)
'''


def test_an_agent_that_swallows_errors_still_stops_at_the_round_cap(task_root, tmp_path, monkeypatch):
    (tmp_path / "stubborn_agent.py").write_text(STUBBORN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = run_config(model="agent:stubborn_agent:build", max_tool_rounds=2)
    run_suite(load_tasks(task_root), config, tmp_path / "run")
    (result,) = ResultsStore(tmp_path / "run").load()[0]
    assert result.episode.outcome == "tool_round_cap"
    (turn,) = result.episode.turns
    assert (turn.status, turn.tool_rounds) == ("tool_round_cap", 3)
    assert [(c.round, c.ok) for c in turn.tool_calls] == [(0, True), (1, True), (2, False)]
    assert turn.tool_calls[2].output.startswith("Not run: the limit of 2 tool rounds")
    assert turn.answer == "try 8"  # the text of the reply that called tools after the cap notice
    import stubborn_agent

    # Four replies reached the agent; every later model call was refused before reaching the model.
    assert len(stubborn_agent.MODELS[-1].calls) == 4
    assert stubborn_agent.FAILURES == ["RoundCapReached"] * 5
