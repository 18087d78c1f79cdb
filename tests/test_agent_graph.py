"""The react turn graph (the tool loop) with a real sandbox and a scripted model: observations, errors,
the round cap."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from vtb_agents.artifacts import IMAGE_REF_TYPE
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.loop import recursion_limit
from vtb_agents.strategies.react import build_react_graph
from vtb_agents.tools import bind_episode_tools, select_tools

CROP = ("from PIL import Image\nim = Image.new('RGB', (200, 100), 'red')\n"
        "im.crop((0, 0, {w}, 50)).save('transformed_image_{i}.png')\nprint('saved {i}')")


def call(name: str, call_id: str, **args) -> dict:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def run_graph(model, artifacts, max_tool_rounds=20, prompt="Look at the image.", native=False):
    with open_sandbox("local") as sandbox:
        context = EpisodeContext(model=model, sandbox=sandbox, artifacts=artifacts, system_prompt="sys",
                                 tools=bind_episode_tools(select_tools(), sandbox, artifacts),
                                 max_tool_rounds=max_tool_rounds, native_tool_images=native)
        graph = build_react_graph()
        state = graph.invoke({"messages": [HumanMessage(prompt, id="turn-0")], "tool_rounds": 0},
                             {"recursion_limit": recursion_limit(max_tool_rounds)}, context=context)
    return state


def test_parallel_calls_get_tool_messages_then_one_image_message(artifacts):
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[
            call("python_image_processing", "a", code=CROP.format(w=100, i=0)),
            call("calculator", "b", expression="6*7"),
            call("python_image_processing", "c", code=CROP.format(w=150, i=1)),
        ]),
        AIMessage("Done: 42."),
    ])
    state = run_graph(model, artifacts)
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "ToolMessage",
                     "HumanMessage", "AIMessage"]
    # Vision calls and general calls run in their own nodes (Send); results come grouped by node.
    tool_messages = {m.tool_call_id: m for m in state["messages"][2:5]}
    assert sorted(tool_messages) == ["a", "b", "c"]
    assert json.loads(tool_messages["b"].content)["result"] == 42
    image_message = state["messages"][5]
    refs = [b for b in image_message.content if b.get("type") == IMAGE_REF_TYPE]
    assert [r["name"] for r in refs] == ["transformed_image_0.png", "transformed_image_1.png"]
    assert all(artifacts.path(r["ref"]).exists() for r in refs)
    # The model's second request carried both images as real image blocks, after the tool results.
    second = model.calls[1]
    image_blocks = [b for m in second if isinstance(m.content, list) for b in m.content
                    if isinstance(b, dict) and b.get("type") == "image"]
    assert len(image_blocks) == 2 and all(b["base64"] and b["mime_type"] == "image/png" for b in image_blocks)
    assert state["status"] == "answered" and state["tool_rounds"] == 1
    # The tools are described alike on every call (a stable prefix for prompt caching): the files the
    # round saved are named in its results, not in the vision tool's description.
    vision = next(t for t in model.bound_tools if t["function"]["name"] == "python_image_processing")
    assert "Files in the working directory" not in vision["function"]["description"]


def test_tool_errors_go_back_to_the_model(artifacts):
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[call("python_image_processing", "a", code="1/0"),
                                  call("no_such_tool", "b", x=1),
                                  call("python_interpreter", "c")]),
        AIMessage("I could not compute it."),
    ])
    state = run_graph(model, artifacts)
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["error", "error", "error"]
    assert "ZeroDivisionError" in results[0].content
    assert "no_such_tool" in results[1].content
    assert "code" in results[2].content  # missing required argument named
    assert state["status"] == "answered"


def test_round_cap_is_a_recorded_outcome_and_the_model_answers_without_tools(artifacts):
    def script(messages):
        if any(isinstance(m, ToolMessage) and "limit of 3 tool rounds" in m.text for m in messages):
            return AIMessage("Final: 2.")
        return AIMessage("", tool_calls=[call("calculator", f"k{len(messages)}", expression="1+1")])

    model = ScriptedChatModel(script=script)
    state = run_graph(model, artifacts, max_tool_rounds=3)
    assert state["status"] == "tool_round_cap" and state["tool_rounds"] == 3
    calling = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    closing, final = state["messages"][-2:]
    assert isinstance(closing, ToolMessage) and closing.tool_call_id == calling[-1].tool_calls[0]["id"]
    assert closing.status == "error" and "limit of 3 tool rounds" in closing.content
    # One last call without tools asks for the final answer (the paper's loop ends with an answer).
    assert isinstance(final, AIMessage) and final.content == "Final: 2." and not final.tool_calls
    assert len(model.calls) == 5
    assert not any(isinstance(m, ToolMessage) for m in model.calls[-1][:1])


@pytest.mark.parametrize("max_rounds", [1, 20])
def test_recursion_limit_covers_the_cap(max_rounds, artifacts):
    model = ScriptedChatModel(script=lambda messages: AIMessage(
        "", tool_calls=[call("calculator", f"k{len(messages)}", expression="2")]))
    state = run_graph(model, artifacts, max_tool_rounds=max_rounds)
    assert state["tool_rounds"] == max_rounds


def test_native_tool_images_go_inside_the_tool_results(artifacts):
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[call("python_image_processing", "a", code=CROP.format(w=100, i=0)),
                                  call("calculator", "b", expression="1+1")]),
        AIMessage("done"),
    ])
    state = run_graph(model, artifacts, native=True)
    kinds = [type(m).__name__ for m in state["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage"]
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    vision = results["a"].content
    assert isinstance(vision, list) and json.loads(vision[0]["text"])["new_images"] == ["transformed_image_0.png"]
    assert [b["name"] for b in vision if b.get("type") == IMAGE_REF_TYPE] == ["transformed_image_0.png"]
    assert isinstance(results["b"].content, str)  # no image, left as it was
    sent = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert any(b.get("type") == "image" and b["base64"] for m in sent if isinstance(m.content, list)
               for b in m.content)


def test_a_user_can_edit_the_model_turn_with_update_state_and_resume(artifacts):
    """Routing reads state only: ``update_state(as_node="model")`` works without a runtime context."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(replies=[AIMessage("The answer is 42.")])
    graph = build_react_graph().copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "edited"}}
    edited = AIMessage("", tool_calls=[call("calculator", "e1", expression="6*7")])
    graph.update_state(config, {"messages": [HumanMessage("What is 6 x 7?", id="turn-0"), edited],
                                "tool_rounds": 0, "status": "running"}, as_node="model")
    assert graph.get_state(config).next == ("general_tools",)
    with open_sandbox("local") as sandbox:
        context = EpisodeContext(model=model, sandbox=sandbox, artifacts=artifacts, system_prompt="sys",
                                 tools=bind_episode_tools(select_tools(), sandbox, artifacts))
        state = graph.invoke(None, config, context=context)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert result.tool_call_id == "e1" and json.loads(result.content)["result"] == 42
    assert state["status"] == "answered" and state["messages"][-1].content == "The answer is 42."


def test_tool_specs_are_the_converted_tools_whatever_the_working_directory_holds(artifacts, tmp_path):
    """The memo of converted specs gives what convert_to_openai_tool gives, before and after a file is
    saved: the tools are part of every request's cached prefix (docs/concepts/prompt-caching.md)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from vtb_agents.strategies.loop import tool_specs

    with open_sandbox("local", workdir=tmp_path / "w") as sandbox:
        tools = bind_episode_tools(select_tools(), sandbox, artifacts)
        before = tool_specs(tools)
        sandbox.put_file("image_0.png", b"png")
        after = tool_specs(tools)
    assert before == after == [convert_to_openai_tool(tool) for tool in tools]
