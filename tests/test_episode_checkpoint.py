"""An episode's thread in a SQLite checkpointer: written when each turn's graph run ends (not after
every step, episodes/driver.py), it still holds the whole conversation for inspection."""

from __future__ import annotations

import sqlite3

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from conftest import write_task
from vtb_agents.episodes.driver import run_episode
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.tasks.local import load_task_dir
from vtb_agents.tools import select_tools
from vtb_agents.sandbox import open_sandbox


def calculator_round(expression: str, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": expression}, "id": call_id}])


def test_thread_holds_the_whole_conversation_after_the_episode(tmp_path, artifacts):
    task = load_task_dir(write_task(tmp_path, "t-ckpt"))
    model = ScriptedChatModel(replies=[calculator_round("6 * 7", "c1"), calculator_round("42 / 2", "c2"),
                                       AIMessage("The number is 42.")])
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    try:
        saver = SqliteSaver(connection)
        with open_sandbox("local") as sandbox:
            episode = run_episode(task, model, select_tools(), sandbox=sandbox, artifacts=artifacts,
                                  model_name="scripted", checkpointer=saver)
        saved = saver.get_tuple({"configurable": {"thread_id": task.id}})
        steps = list(saver.list({"configurable": {"thread_id": task.id}}))
    finally:
        connection.close()
    assert episode.turns[0].answer == "The number is 42." and len(episode.tool_calls) == 2
    messages = saved.checkpoint["channel_values"]["messages"]
    assert [m.text for m in messages if isinstance(m, ToolMessage)] == [c.output for c in episode.tool_calls]
    assert messages[-1].text == "The number is 42."
    assert len(steps) <= 2  # written when the graph run ends (12 with a checkpoint after every step)
