"""Checkpoint bytes: image references in state (ours) versus base64 images in state.

A 10-round episode whose vision calls produce five transformed 2000x1500 images runs through the
real graph, sandbox and SQLite checkpointer. The same conversation with every image reference
replaced by its base64 image block (what a harness that keeps images in state would checkpoint)
is serialised by the same checkpointer. Both sizes come from one run.

    .venv/bin/python bench/checkpoint_size.py
"""

from __future__ import annotations

import io
import sqlite3
import tempfile
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from PIL import Image

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.loop import recursion_limit
from vtb_agents.strategies.observe import materialize_messages
from vtb_agents.tasks import load_tasks
from vtb_agents.tools import bind_episode_tools, select_tools

ROUNDS, IMAGES, SIZE = 10, 5, (2000, 1500)
# Each saved image is a crop of the sample invoice zoomed back to 2000x1500, as a model would.
SAVE = ("from PIL import Image\nim = Image.open('image_0.png')\n"
        "box = ({n} * 100, {n} * 75, {n} * 100 + 1000, {n} * 75 + 750)\n"
        "im.crop(box).resize(({w}, {h}), Image.Resampling.LANCZOS).save('transformed_image_{n}.png')")
CALC = "{n} * 3"


def script() -> list[AIMessage]:
    replies = []
    for n in range(ROUNDS):
        if n < IMAGES:
            call = {"name": "python_image_processing", "args": {"code": SAVE.format(n=n, w=SIZE[0], h=SIZE[1])}}
        else:
            call = {"name": "calculator", "args": {"expression": CALC.format(n=n)}}
        replies.append(AIMessage("", tool_calls=[{**call, "id": f"c{n}"}]))
    return replies + [AIMessage("done")]


def checkpoint_bytes(saver: SqliteSaver, thread: str) -> int:
    """Serialised size of the thread's latest checkpoint, as the saver stores it."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert latest is not None
    _, blob = saver.serde.dumps_typed(latest.checkpoint)
    return len(blob)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, open_sandbox("local") as sandbox:
        artifacts = ArtifactStore(Path(tmp) / "artifacts")
        invoice = load_tasks("sample")[0].images[0]  # a real sample-suite scene, upscaled
        Image.open(io.BytesIO(invoice.read_bytes())).convert("RGB").resize(SIZE).save(Path(tmp) / "image_0.png")
        sandbox.put_file("image_0.png", (Path(tmp) / "image_0.png").read_bytes())
        opening = HumanMessage(content=[{"type": "text", "text": "Read the corner."},
                                        {"type": "image_ref", "ref": artifacts.put(sandbox.get_file("image_0.png")),
                                         "name": "image_0.png"}], id="turn-0")
        connection = sqlite3.connect(Path(tmp) / "checkpoints.sqlite", check_same_thread=False)
        saver = SqliteSaver(connection)
        graph = build_category_graph("region_switch", checkpointer=saver)
        context = EpisodeContext(model=ScriptedChatModel(replies=script()), sandbox=sandbox, artifacts=artifacts,
                                 tools=bind_episode_tools(select_tools(), sandbox, artifacts), system_prompt="bench",
                                 max_image_side=SIZE[0])
        config = {"configurable": {"thread_id": "refs"}, "recursion_limit": recursion_limit(20)}
        state = graph.invoke({"messages": [opening], "turn": 0, "num_turns": 1}, config, context=context)
        inline = materialize_messages(state["messages"], artifacts, max_side=SIZE[0])
        inline_graph = build_category_graph("region_switch", checkpointer=saver)
        # Written as the answer node's update: in a region_switch graph its only edge is to END.
        inline_graph.update_state({"configurable": {"thread_id": "base64"}}, {"messages": inline}, as_node="answer")
        refs, b64 = checkpoint_bytes(saver, "refs"), checkpoint_bytes(saver, "base64")
        connection.close()
    print(f"rounds={ROUNDS} images={IMAGES + 1} ({SIZE[0]}x{SIZE[1]})")
    print(f"references in state: {refs:,} bytes")
    print(f"base64 in state:     {b64:,} bytes")
    print(f"ratio: {b64 / refs:,.0f}x smaller with references")


if __name__ == "__main__":
    main()
