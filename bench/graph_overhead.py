"""Harness overhead per tool round, with a zero-latency scripted model.

Side by side in one run (interleaved repetitions, medians): (a) the bare work of a round, calling
the scripted model and the calculator tool directly in a loop; (a') the same work in a LangGraph
graph of three plain nodes (the floor of any LangGraph agent); (b) the same rounds through our
agent graph (model node, Send to the tool node, observe) with an in-memory checkpointer; (c) the
same with the SQLite checkpointer a run uses. Both checkpoint as a run does (when the turn's graph
run ends). The difference is what the harness adds per round.

    .venv/bin/python bench/graph_overhead.py
"""

from __future__ import annotations

import operator
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.episodes.driver import CHECKPOINT_DURABILITY
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.loop import recursion_limit
from vtb_agents.tools import bind_episode_tools, select_tools
from vtb_agents.tools.calculator import calculator

ROUNDS, REPEATS = 20, 7


def replies() -> list[AIMessage]:
    calls = [AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": f"{n}^2"}, "id": f"c{n}"}])
             for n in range(ROUNDS)]
    return calls + [AIMessage("done")]


def bare() -> float:
    model = ScriptedChatModel(replies=replies())
    messages: list = [HumanMessage("go")]
    start = time.perf_counter()
    for _ in range(ROUNDS):
        reply = model.invoke(messages)
        messages.append(reply)
        for call in reply.tool_calls:
            messages.append(calculator.invoke({**call, "type": "tool_call"}))
    model.invoke(messages)
    return (time.perf_counter() - start) / ROUNDS


def through_graph(checkpointer, sandbox, artifacts, thread: str) -> float:
    graph = build_category_graph("region_switch", checkpointer=checkpointer)
    context = EpisodeContext(model=ScriptedChatModel(replies=replies()), sandbox=sandbox, artifacts=artifacts,
                             tools=bind_episode_tools(select_tools(), sandbox, artifacts), system_prompt="bench",
                             max_tool_rounds=ROUNDS)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": recursion_limit(ROUNDS)}
    start = time.perf_counter()
    state = graph.invoke({"messages": [HumanMessage("go", id="turn-0")], "turn": 0, "num_turns": 1}, config,
                         context=context, durability=CHECKPOINT_DURABILITY)  # as a run checkpoints
    elapsed = time.perf_counter() - start
    assert state["tool_rounds"] == ROUNDS and state["status"] == "answered"
    return elapsed / ROUNDS


class LoopState(TypedDict):
    messages: Annotated[list, operator.add]
    rounds: int


def noop_loop() -> float:
    """The same rounds through LangGraph alone: three nodes per round (the model's, the tool's,
    an observing one) doing the bare loop's work, nothing of ours around it."""
    model = ScriptedChatModel(replies=replies())

    def call(state: LoopState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: LoopState) -> dict:
        calls = state["messages"][-1].tool_calls
        return {"messages": [calculator.invoke({**c, "type": "tool_call"}) for c in calls]}

    def observe(state: LoopState) -> dict:
        return {"rounds": state["rounds"] + 1}

    builder = StateGraph(LoopState)
    builder.add_node("model", call)
    builder.add_node("tools", tools)
    builder.add_node("observe", observe)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END,
                                  ["tools", END])
    builder.add_edge("tools", "observe")
    builder.add_edge("observe", "model")
    graph = builder.compile(checkpointer=InMemorySaver())
    start = time.perf_counter()
    state = graph.invoke({"messages": [HumanMessage("go")], "rounds": 0},
                         {"configurable": {"thread_id": "noop"}, "recursion_limit": recursion_limit(ROUNDS)},
                         durability=CHECKPOINT_DURABILITY)
    elapsed = time.perf_counter() - start
    assert state["rounds"] == ROUNDS
    return elapsed / ROUNDS


def main() -> None:
    samples: dict[str, list[float]] = {"bare": [], "LangGraph alone": [], "graph (memory)": [],
                                       "graph (sqlite)": []}
    with tempfile.TemporaryDirectory() as tmp, open_sandbox("local") as sandbox:
        artifacts = ArtifactStore(Path(tmp) / "artifacts")
        connection = sqlite3.connect(Path(tmp) / "checkpoints.sqlite", check_same_thread=False)
        sqlite_saver = SqliteSaver(connection)
        through_graph(InMemorySaver(), sandbox, artifacts, "warm-up")
        for i in range(REPEATS):
            samples["bare"].append(bare())
            samples["LangGraph alone"].append(noop_loop())
            samples["graph (memory)"].append(through_graph(InMemorySaver(), sandbox, artifacts, f"m{i}"))
            samples["graph (sqlite)"].append(through_graph(sqlite_saver, sandbox, artifacts, f"s{i}"))
        connection.close()
    base = statistics.median(samples["bare"])
    print(f"{ROUNDS} calculator rounds per episode, median of {REPEATS} interleaved repetitions")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:16s} {median * 1000:7.2f} ms per round   {median / base:5.1f}x bare   "
              f"overhead {(median - base) * 1000:6.2f} ms")


if __name__ == "__main__":
    main()
