"""Harness overhead per tool round, with a zero-latency scripted model.

Side by side in one run (interleaved repetitions, medians): (a) the bare work of a round, calling
the scripted model and the calculator tool directly in a loop; (b) the same rounds through our
agent graph (model node, Send to the tool node, observe) with an in-memory checkpointer; (c) the
same with the SQLite checkpointer a run uses. The difference is what the harness adds per round.

    .venv/bin/python bench/graph_overhead.py
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from vtb_agents.artifacts import ArtifactStore
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
                         context=context)
    elapsed = time.perf_counter() - start
    assert state["tool_rounds"] == ROUNDS and state["status"] == "answered"
    return elapsed / ROUNDS


def main() -> None:
    samples: dict[str, list[float]] = {"bare": [], "graph (memory)": [], "graph (sqlite)": []}
    with tempfile.TemporaryDirectory() as tmp, open_sandbox("local") as sandbox:
        artifacts = ArtifactStore(Path(tmp) / "artifacts")
        connection = sqlite3.connect(Path(tmp) / "checkpoints.sqlite", check_same_thread=False)
        sqlite_saver = SqliteSaver(connection)
        through_graph(InMemorySaver(), sandbox, artifacts, "warm-up")
        for i in range(REPEATS):
            samples["bare"].append(bare())
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
