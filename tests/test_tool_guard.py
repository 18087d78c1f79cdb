"""Every tool answers every call with a ToolMessage, never an exception (tools/guard.py).

Property-based: hypothesis feeds random arguments (right keys with wrong values, unknown keys,
hostile values) to each of the six tools, in both of their forms: the graph's (code tools reading
the episode's runtime context) and the bound one given to users' agents. The code tools run in a
real local sandbox; the network tools replay the sample suite's cassette, so nothing leaves the
machine and a miss is an error message like any failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphInterrupt

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import LocalSandbox
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.react import build_react_graph
from vtb_agents.tasks.sources import SAMPLE_CASSETTE
from vtb_agents.tools import TOOL_NAMES, bind_episode_tools, guard_tool, select_tools
from vtb_agents.tools.network import NetworkSettings

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=40))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                    max_leaves=8)
HOSTILE_TEXT = st.sampled_from([
    "2**100000", "9**9**9", "1/0", "(" * 300, "10**4300 + 1", "sqrt(-1)", "", " ", "\x00", "é" * 50,
    "import os; os._exit(3)", "raise SystemExit(1)", "print('x' * 100000)", "while True: break",
    "import os, sys; os.write(int(sys.argv[2]) if len(sys.argv) > 2 else 99, b'\\x00\\x00\\x00\\x02{}')",
    "https://example.invalid/" + "a" * 100, "2024-02-30", "not a date", "0000-00-00",
])
VALUES = st.one_of(HOSTILE_TEXT, st.text(max_size=200), JSON)


def arguments(tool: BaseTool) -> st.SearchStrategy[dict[str, Any]]:
    """Random arguments for ``tool``: any subset of its own keys with any values, plus stray keys."""
    keys = sorted(tool.tool_call_schema.model_json_schema().get("properties", {}))
    own = st.fixed_dictionaries({}, optional={key: VALUES for key in keys})
    return st.tuples(own, st.dictionaries(st.text(max_size=10), JSON, max_size=2)).map(
        lambda pair: {**pair[1], **pair[0]})


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    with LocalSandbox(tmp_path_factory.mktemp("work")) as box:
        yield box


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("artifacts"))


def replayed_network() -> NetworkSettings:
    return NetworkSettings(mode="replay", cache_path=Path(SAMPLE_CASSETTE))


def call(tool: BaseTool, args: dict[str, Any]) -> Any:
    return tool.invoke({"type": "tool_call", "id": "call-1", "name": tool.name, "args": dict(args)})


def assert_tool_message(result: Any, tool: BaseTool) -> None:
    assert isinstance(result, ToolMessage), f"{tool.name} returned {type(result).__name__}"
    assert result.tool_call_id == "call-1" and isinstance(result.content, str)
    if result.status == "error":
        json.loads(result.content)  # error messages are JSON, like every tool's


GRAPH_TOOLS = select_tools(network=replayed_network())
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])


def test_the_six_tools_are_all_covered():
    assert sorted(t.name for t in GRAPH_TOOLS) == sorted(TOOL_NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TOOL_NAMES))
def test_graph_tools_answer_random_arguments_with_a_tool_message(name, sandbox, store):
    tool = next(t for t in bind_episode_tools(GRAPH_TOOLS, sandbox, store, 5.0) if t.name == name)

    @PROPERTY
    @given(arguments(tool))
    def check(args: dict[str, Any]) -> None:
        assert_tool_message(call(tool, args), tool)

    check()


def test_calculator_overflowing_text_is_an_error_message_and_the_episode_goes_on(sandbox, store):
    """calculator("2**100000") computes, but its 30,103 digits cannot become text: before the
    guard that crashed the episode; now the model reads an error and answers."""
    calls = [AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "2**100000"}, "id": "big"}]),
             AIMessage("Too large to print; the answer is 2^100000.")]
    model = ScriptedChatModel(replies=calls)
    graph = build_react_graph()
    context = EpisodeContext(model=model, sandbox=sandbox, artifacts=store, system_prompt="s",
                             tools=bind_episode_tools(select_tools(network=replayed_network()), sandbox, store))
    state = graph.invoke({"messages": [HumanMessage("2**100000?")], "tool_rounds": 0, "status": "running"},
                         {"recursion_limit": 20}, context=context)
    (error,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert error.status == "error"
    assert "calculator failed: ValueError: Exceeds the limit (4300 digits)" in json.loads(error.content)["error"]
    assert state["messages"][-1].content == "Too large to print; the answer is 2^100000."
    assert state["status"] == "answered" and len(model.calls) == 2  # the model saw the error and answered


def test_guard_keeps_the_tool_and_never_swallows_time_limits_or_interrupts():
    def raising(exc: BaseException):
        def run(expression: str) -> str:
            raise exc
        return run

    from langchain_core.tools import StructuredTool

    for exc in (TaskTimeout("late"), GraphInterrupt(()), KeyboardInterrupt()):
        inner = StructuredTool.from_function(raising(exc), name="calculator", description="d")
        with pytest.raises(type(exc)):
            call(guard_tool(inner), {"expression": "1"})
    inner = StructuredTool.from_function(raising(RuntimeError("boom")), name="calculator", description="d",
                                         response_format="content_and_artifact")
    guarded = guard_tool(inner)
    assert (guarded.name, guarded.description, guarded.args_schema, guarded.response_format) == \
        (inner.name, inner.description, inner.args_schema, "content_and_artifact")
    assert guard_tool(guarded) is guarded
    message = call(guarded, {"expression": "1"})
    assert message.status == "error"
    assert json.loads(message.content) == {"error": "calculator failed: RuntimeError: boom"}
