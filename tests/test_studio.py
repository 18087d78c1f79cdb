"""langgraph.json and the Studio graphs' parts: entry points load as the server loads them, draw
the graphs ``vtb run`` uses inside them, take a JSON context, and keep one sandbox per thread.
(Runs over the LangGraph API: tests/test_studio_server.py.)"""

from __future__ import annotations

import base64
import importlib
import io
import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph.state import CompiledStateGraph
from PIL import Image

from vtb_agents.api import load_tasks
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.config import RunConfig
from vtb_agents.runner.plan import sandbox_kind_opener
from vtb_agents.sandbox import SandboxError
from vtb_agents.studio.context import context_of, resources_for
from vtb_agents.studio.inputs import block_image, ingest_message, task_from_json, thread_images, user_image_count
from vtb_agents.studio.sessions import SessionRegistry
from vtb_agents.tasks.errors import TaskLoadError

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = json.loads((ROOT / "langgraph.json").read_text())["graphs"]


def load_entry(spec: str) -> object:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def png(size: tuple[int, int] = (8, 6)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "red").save(out, format="PNG")
    return out.getvalue()


def test_every_category_the_grading_and_the_task_graph_are_exposed():
    assert set(ENTRIES) == {"region_switch", "hybrid_tool", "follow_up", "temporal", "progressive", "grading", "task"}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_entry_point_loads_draws_and_has_a_json_context(name):
    graph = load_entry(ENTRIES[name])
    assert isinstance(graph, CompiledStateGraph) and graph.name == name
    drawing = graph.get_graph(xray=True)
    nodes = {node.split(":")[-1] for node in drawing.nodes}
    expected = {"grading": {"judge_rubric", "aggregate"}, "task": {"load", "episode", "ask", "judge_rubric"}}
    assert expected.get(name, {"ingest", "model", "vision_tools", "observe"}) <= nodes
    assert ("clarify" in nodes) == (name == "follow_up")  # the follow-up category graph, drawn inside
    drawing.draw_mermaid()
    schema = graph.get_context_jsonschema()
    json.dumps(schema)
    assert {"model", "judge", "strategy", "sandbox", "episode"} <= set(schema["properties"])
    assert {"max_tool_rounds", "prompt_level"} <= set(schema["$defs"]["EpisodeSettings"]["properties"])
    assert schema == RunConfig.model_json_schema()  # the run's own record, no copy of its fields


def test_context_defaults_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("VTB_MODEL", "openai:gpt-4o-mini")
    monkeypatch.delenv("VTB_JUDGE", raising=False)
    ctx = context_of(None)
    assert (ctx.model, ctx.judge, ctx.tasks, ctx.strategy) == ("openai:gpt-4o-mini", "rule", "sample", "react")
    assert context_of({"episode": {"max_tool_rounds": 3}}).episode.max_tool_rounds == 3
    assert context_of(RunConfig(model="openai:o3")).model == "openai:o3"  # as LangGraph builds it from JSON
    assert context_of(RunConfig(strategy="zoom")).model == "openai:gpt-4o-mini"  # unset: the environment's
    monkeypatch.delenv("VTB_MODEL")
    assert context_of({}).model == "replay"
    with pytest.raises(ValueError, match="context field episode.max_tool_rounds: .*integer.*'many'"):
        context_of({"episode": {"max_tool_rounds": "many"}})
    with pytest.raises(ValueError, match="context field episode.prompt_level: .*'extreme'"):
        context_of({"episode": {"prompt_level": "extreme"}})
    with pytest.raises(ValueError, match="context field resumer: must be one of scripted, simulated in Studio"):
        context_of({"resumer": "human"})


def test_chat_graphs_refuse_the_replay_model_with_a_clear_error():
    with pytest.raises(ValueError, match="use the 'task' graph"):
        resources_for(RunConfig(model="replay"), chat=True)
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        resources_for(RunConfig(model="replay", strategy="nope"), chat=False)


def test_image_blocks_of_every_common_shape_are_read_and_urls_refused():
    data = png()
    b64 = base64.b64encode(data).decode()
    shapes = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}},
              {"type": "image_url", "image_url": f"data:image/png;base64,{b64}"},
              {"type": "image", "base64": b64, "mime_type": "image/png"},
              {"type": "image", "source_type": "base64", "data": b64, "mime_type": "image/png"},
              {"type": "image", "url": f"data:image/png;base64,{b64}"}]
    assert all(block_image(block, "b") == data for block in shapes)
    assert block_image({"type": "text", "text": "hi"}, "b") is None
    with pytest.raises(ValueError, match="does not download"):
        block_image({"type": "image_url", "image_url": {"url": "http://example.com/x.png"}}, "block 2")
    with pytest.raises(ValueError, match="block 3: not base64"):
        block_image({"type": "image", "base64": "***"}, "block 3")


def test_ingest_places_images_under_the_next_free_names(tmp_path):
    store = ArtifactStore(tmp_path)
    placed = {}

    def place(name, data):
        placed[name] = data
        return [{"type": "text", "text": f"[{name}]"}, {"type": "image_ref", "ref": store.put(data), "name": name}]

    url = "data:image/png;base64," + base64.b64encode(png()).decode()
    message = HumanMessage(content=[{"type": "text", "text": "compare"},
                                    {"type": "image_url", "image_url": {"url": url}},
                                    {"type": "image_url", "image_url": {"url": url}}])
    turn = ingest_message(message, 2, place, "turn-1")
    assert turn.id == "turn-1" and sorted(placed) == ["image_2.png", "image_3.png"]
    assert [b.get("text") for b in turn.content if b["type"] == "text"] == ["compare", "[image_2.png]", "[image_3.png]"]
    assert [name for name, _ in thread_images([turn])] == ["image_2.png", "image_3.png"]
    assert user_image_count([turn]) == 2


def test_inline_task_needs_its_images_as_base64_and_names_bad_fields():
    data = {"id": "t1", "category": "Region Switch Q&A", "domain": "finance",
            "images": [{"file": "image_0.png", "data": base64.b64encode(png()).decode()}],
            "turns": [{"prompt": "What is it?", "images": [0], "golden_answer": "red", "rubrics": {
                "r1": {"description": "Says red", "weight": 5, "check": {"type": "contains_any", "values": ["red"]}}}}]}
    task = task_from_json(data)
    assert task.images[0].read_bytes() == png() and task.category == "region_switch"
    with pytest.raises(TaskLoadError, match=r"images\.0\.data"):
        task_from_json({**data, "images": [{"file": "image_0.png"}]})
    assert task_from_json({**data, "images": [{"file": "image_0.png"}]}, with_images=False).id == "t1"
    with pytest.raises(TaskLoadError, match="turn 1.*prompt"):
        task_from_json({**data, "turns": [{"images": [0]}]})


def test_a_thread_keeps_its_sandbox_and_a_lost_one_comes_back_with_the_thread_images(tmp_path, monkeypatch):
    monkeypatch.setenv("VTB_STUDIO_DIR", str(tmp_path))
    registry = SessionRegistry(max_open=1)
    LOCAL = sandbox_kind_opener("local")  # noqa: N806 - what a run's plan hands the registry
    with registry.use("t1", "local", LOCAL) as session:
        session.sandbox.put_file("image_0.png", png())
        session.sandbox.run("x = 41")
        ref = session.artifacts.put(png())
        first = session.sandbox
    with registry.use("t1", "local", LOCAL) as session:
        assert session.sandbox is first and "42" in session.sandbox.run("print(x + 1)").stdout
    with registry.use("t2", "local", LOCAL) as session:  # room for one: t1's idle sandbox is closed
        assert "42" in session.sandbox.run("print(42)").stdout
        with pytest.raises(SandboxError, match="closed"):
            first.run("print(x)")
        second = session.sandbox
    with registry.use("t1", "local", LOCAL, [("image_0.png", ref)]) as session:
        assert session.sandbox is not first and "image_0.png" in session.sandbox.list_files()
        assert (tmp_path / "t1" / "artifacts").is_dir()
        with pytest.raises(SandboxError, match="closed"):
            second.run("print(1)")
        third = session.sandbox
    registry.discard("t1")  # a new task on the thread: a fresh sandbox
    with pytest.raises(SandboxError, match="closed"):
        third.run("print(1)")
    with registry.use("t3", "local", LOCAL) as session:
        fourth = session.sandbox
    registry.close_all()
    with pytest.raises(SandboxError, match="closed"):
        fourth.run("print(1)")


def test_task_graph_runs_the_driver_in_process_and_keeps_the_conversation_in_its_thread(tmp_path, monkeypatch):
    """The task graph pauses at the driver's question and continues with the reply; the category graph's
    conversation is a subgraph's state in the task graph's own thread."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from vtb_agents.studio.task import build_task_graph

    monkeypatch.setenv("VTB_STUDIO_DIR", str(tmp_path))
    graph = build_task_graph().copy(update={"checkpointer": InMemorySaver()})
    context = RunConfig(model="replay")
    first = {"configurable": {"thread_id": "in-process"}}
    graph.invoke({"task_id": "fu-medical-labs"}, first, context=context)
    [pending] = graph.get_state(first).interrupts
    assert pending.value["turn"] == 0 and pending.value["next_prompt"]
    saved = graph.checkpointer.get_tuple({"configurable": {"thread_id": "in-process", "checkpoint_ns": "episode"}})
    inner = saved.checkpoint["channel_values"]["messages"]  # the category graph's, kept by the task graph's thread
    assert inner[-1].text == pending.value["question"] and inner[0].id == "turn-0"
    state = graph.invoke(Command(resume=""), first, context=context)
    assert [t["status"] for t in state["episode"]["turns"]] == ["asked_user", "answered"]
    assert state["grade"]["passed"] is True
    # the episode's transcript, turn by turn, as `vtb run` records it (the replay agent asks, then crops and answers)
    assert [(e["kind"], e["step"], e["call"]["turn"] if e["kind"] == "tool" else e["turn"])
            for e in state["transcript"]] == [
        ("model", "model", 0), ("model", "model", 1), ("tool", "vision_tools", 1), ("model", "model", 1)]
    turn_calls = state["episode"]["turns"][1]["tool_calls"]  # the tool event carries the turn's own record
    assert [e["call"] for e in state["transcript"] if e["kind"] == "tool"] == turn_calls
    assert state["transcript"][0]["images"] and state["transcript"][1]["messages"][-1]["role"] == "human"
    # the same task again on the thread (inline this time): its conversation starts afresh
    task = load_tasks("sample", task_id="fu-medical-labs")[0]
    inline = task.model_dump(mode="json")
    for image, original in zip(inline["images"], task.images):
        image["data"] = "data:image/png;base64," + base64.b64encode(original.read_bytes()).decode()
    again = graph.invoke({"task": inline}, first, context=context)
    assert [m.type for m in again["messages"]] == ["human", "ai"] and again["messages"][0].id == "turn-0"
    # then another task of the suite by id on the same thread: that task, not the one stored before
    other = graph.invoke({"task_id": "rs-finance-invoice"}, first, context=context)
    assert other["episode"]["task_id"] == "rs-finance-invoice" and other["grade"]["passed"] is True


def test_task_graph_traces_the_episode_inside_its_episode_node(tmp_path, monkeypatch):
    """LangSmith nests the category graph's model calls under the task graph's ``episode`` step."""
    from langchain_core.callbacks import BaseCallbackHandler
    from langgraph.checkpoint.memory import InMemorySaver

    from vtb_agents.studio.task import build_task_graph

    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.parents: dict[object, tuple[str, object]] = {}

        def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kwargs):
            self.parents[run_id] = (kwargs.get("name") or "", parent_run_id)

        def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kwargs):
            self.parents[run_id] = ("chat model", parent_run_id)

        def ancestry(self, run_id: object) -> list[str]:
            names = []
            while run_id is not None:
                name, run_id = self.parents[run_id]
                names.append(name)
            return names

    monkeypatch.setenv("VTB_STUDIO_DIR", str(tmp_path))
    runs = Runs()
    graph = build_task_graph().copy(update={"checkpointer": InMemorySaver()})
    graph.invoke({"task_id": "fu-medical-labs"}, {"configurable": {"thread_id": "traced"}, "callbacks": [runs]},
                 context=RunConfig(model="replay"))
    calls = [runs.ancestry(run) for run, (name, _) in runs.parents.items() if name == "chat model"]
    assert len(calls) == 1  # the first turn asks, so the run pauses after one model call
    # the model node of the category graph's run (named after the task), inside the task graph's episode node
    assert "model" in calls[0] and calls[0][-3:] == ["vtb:fu-medical-labs", "episode", "task"], calls[0]
