"""The Studio graphs run under a real ``langgraph dev`` server, driven through ``langgraph_sdk``.

One server (in-memory runtime, 127.0.0.1, no browser, no analytics, no version check) serves
``langgraph.json``; its model is a local OpenAI-compatible server playing a scripted vision model
(crop the newest image, then answer 42; ask first on a chosen prompt), given as
``VTB_MODEL=openai:...`` in the server's environment, so runs need no context.
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from PIL import Image, ImageDraw

from langgraph_sdk import get_sync_client
from support.openai_server import OpenAIServer
from support.scripted_vision import QUESTION, VisionModel, _images
from support.together import together
from vtb_agents.api import load_tasks
from vtb_agents.config import EpisodeSettings

ROOT = Path(__file__).resolve().parents[1]
GRAPHS = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
CATEGORIES = ["region_switch", "hybrid_tool", "follow_up", "temporal", "progressive"]
AMBIGUOUS = "Is this value normal?"
START_TIMEOUT_S = 90


def png_data_url(size: tuple[int, int] = (400, 300)) -> str:
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).text((20, 20), "42", fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(VisionModel(ask_first=True, ask_on=frozenset({AMBIGUOUS}))) as server:
        yield server


@pytest.fixture(scope="module")
def server_url(model_server: OpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` on a free port of 127.0.0.1, run from a scratch folder (its state goes there)."""
    work = tmp_path_factory.mktemp("langgraph-dev")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "VTB_"))}
    env.update(PYTHONPATH=str(ROOT), OPENAI_BASE_URL=model_server.base_url, OPENAI_API_KEY="test-key",
               VTB_MODEL="openai:scripted-vision", VTB_JUDGE="rule", VTB_STUDIO_DIR=str(work / "studio"),
               LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true", LANGSMITH_TRACING="false")
    log = (work / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "langgraph_cli", "dev", "--config", str(ROOT / "langgraph.json"), "--host", "127.0.0.1",
         "--port", str(port), "--no-browser", "--no-reload"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                log = (work / "server.log").read_text()[-3000:]
                pytest.fail(f"langgraph dev exited with {process.returncode}:\n{log}")
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                log = (work / "server.log").read_text()[-3000:]
                pytest.fail(f"langgraph dev did not answer in {START_TIMEOUT_S}s:\n{log}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def client(server_url: str) -> Any:
    return get_sync_client(url=server_url)


def user_message(text: str, with_image: bool = True) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if with_image:
        content.append({"type": "image_url", "image_url": {"url": png_data_url()}})
    return {"role": "user", "content": content}


def last_ai_text(state: dict[str, Any]) -> str:
    ai = [m for m in state["messages"] if m["type"] == "ai"]
    content = ai[-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


@pytest.mark.slow
def test_all_seven_graphs_are_served_with_json_schemas(client: Any) -> None:
    assert set(GRAPHS) == {*CATEGORIES, "grading", "task"}
    for graph_id in GRAPHS:
        [assistant] = client.assistants.search(graph_id=graph_id)
        schemas = client.assistants.get_schemas(assistant["assistant_id"])
        fields = set(schemas["context_schema"]["properties"])
        assert {"model", "judge", "strategy", "sandbox", "episode"} <= fields
        assert "max_tool_rounds" in schemas["context_schema"]["$defs"]["EpisodeSettings"]["properties"]
        assert schemas["input_schema"]["properties"]


@pytest.mark.slow
@pytest.mark.parametrize("graph_id", [c for c in CATEGORIES if c != "follow_up"])
def test_category_graph_answers_a_chat_message_with_an_image(client: Any, model_server: OpenAIServer,
                                                             graph_id: str) -> None:
    thread = client.threads.create()
    sent = len(model_server.requests)
    state = client.runs.wait(thread["thread_id"], graph_id, input={"messages": [user_message("What number is it?")]})
    assert last_ai_text(state) == "Final answer: 42."
    tools = [m for m in state["messages"] if m["type"] == "tool"]
    assert len(tools) == 1 and tools[0]["status"] != "error" and "transformed_image_" in tools[0]["content"]
    assert state["status"] == "answered"
    first = state["messages"][0]
    assert first["id"] == "turn-0" and {"type": "text", "text": "[image_0.png]"} in first["content"]
    new_requests = model_server.requests[sent:]
    assert len(new_requests) == 2
    seen = [image.size for m in new_requests[1]["messages"] for image in _images(m)]
    assert seen == [(400, 300), (300, 200)]  # the user's image, then the crop the tool saved


@pytest.mark.slow
def test_a_thread_keeps_its_turns_and_streams_the_category_graph_steps(client: Any, model_server: OpenAIServer) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "temporal", input={"messages": [user_message("What number is it?")]})
    sent = len(model_server.requests)
    parts = list(client.runs.stream(thread, "temporal", input={"messages": [user_message("And now?")]},
                                    stream_mode="updates", stream_subgraphs=True))
    inner = [p.data for p in parts if p.event.startswith("updates|turn:")]
    assert {"model", "vision_tools", "observe"} <= {node for update in inner for node in update}
    state = client.threads.get_state(thread)["values"]
    second = next(m for m in state["messages"] if m.get("id") == "turn-1")
    assert {"type": "text", "text": "[image_1.png]"} in second["content"]  # images are numbered across the thread
    call = json.loads(model_server.requests[sent + 1]["messages"][-3]["tool_calls"][0]["function"]["arguments"])
    assert "Image.open('image_1.png')" in call["code"]  # the model cropped the new image...
    tools = [m for m in state["messages"] if m["type"] == "tool"]
    assert len(tools) == 2 and '"ok": true' in tools[1]["content"]  # ...which the thread's sandbox holds
    assert last_ai_text(state) == "Final answer: 42."


@pytest.mark.slow
def test_follow_up_graph_pauses_on_a_question_and_resumes_with_plain_text(client: Any,
                                                                          model_server: OpenAIServer) -> None:
    thread = client.threads.create()["thread_id"]
    state = client.runs.wait(thread, "follow_up", input={"messages": [user_message(AMBIGUOUS)]})
    assert last_ai_text(state) == QUESTION
    [pending] = client.threads.get_state(thread)["interrupts"]
    assert pending["value"] == {"question": QUESTION, "turn": 0}
    state = client.runs.wait(thread, "follow_up", command={"resume": "The sodium one."})
    assert last_ai_text(state) == "Final answer: 42."
    humans = [m for m in state["messages"] if m["type"] == "human" and (m.get("id") or "").startswith("turn-")]
    assert [m["id"] for m in humans] == ["turn-0", "turn-1"]
    assert humans[1]["content"] == [{"type": "text", "text": "The sodium one."}]
    assert client.threads.get_state(thread)["interrupts"] == []


@pytest.mark.slow
def test_grading_graph_returns_verdicts_and_score(client: Any) -> None:
    task = load_tasks("sample", task_id="fu-medical-labs")[0]
    data = task.model_dump(mode="json")
    golden, wrong = together(*(  # two stateless runs side by side
        partial(client.runs.wait, None, "grading", input={"task": data, "answers": answers})
        for answers in ([t.golden_answer for t in task.turns], ["No idea."] * len(task.turns))))
    verdicts = golden["grade"]["verdicts"]
    assert [(v["turn"], v["rubric_id"]) for v in verdicts] == [(t, r.id) for t, r in task.rubrics]
    assert all(v["status"] == "met" for v in verdicts)
    assert golden["grade"]["score"] == 1.0 and golden["grade"]["passed"] is True
    assert wrong["grade"]["passed"] is False and wrong["grade"]["score"] < 1.0


def inline_follow_up_task() -> dict[str, Any]:
    """A two-turn follow-up task the scripted model passes: it asks on turn 1, reads 42 on turn 2."""
    rubric = {"weight": 5, "critical": "yes", "objective/subjective": "objective", "explicit/implicit": "explicit",
              "category": ["visual understanding"], "final_answer": "yes"}
    return {"id": "inline-fu", "category": "Follow-up Test", "domain": "finance",
            "images": [{"file": "image_0.png", "data": png_data_url()}],
            "turns": [{"prompt": AMBIGUOUS, "images": [0], "golden_answer": "Which value do you mean?",
                       "rubrics": {"r1": {**rubric, "description": "Asks which value",
                                          "check": {"type": "regex", "pattern": "\\?"}}}},
                      {"prompt": "The number at the top left.", "images": [], "golden_answer": "It is 42.",
                       "rubrics": {"r2": {**rubric, "description": "Says 42",
                                          "check": {"type": "number", "value": 42}}}}]}


@pytest.mark.slow
def test_task_graph_runs_a_follow_up_task_through_its_question_to_verdicts(client: Any,
                                                                           model_server: OpenAIServer) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "task", input={"task": inline_follow_up_task()})
    [pending] = client.threads.get_state(thread)["interrupts"]
    assert pending["value"]["question"] == QUESTION
    assert pending["value"]["next_prompt"] == "The number at the top left."
    state = client.runs.wait(thread, "task", command={"resume": ""})  # the scripted resumer replies
    turns = state["episode"]["turns"]
    assert [(t["status"], t["answer"]) for t in turns] == [("asked_user", QUESTION), ("answered", "Final answer: 42.")]
    assert turns[1]["tool_calls"][0]["name"] == "python_image_processing" and turns[1]["tool_calls"][0]["ok"]
    humans = [m for m in state["messages"] if (m.get("id") or "").startswith("turn-")]
    assert humans[1]["content"][0] == {"type": "text", "text": "The number at the top left."}
    # golden history: the question the model asked reads as the golden answer in the thread
    assert "Which value do you mean?" in [m["content"] for m in state["messages"] if m["type"] == "ai"]
    grade = state["grade"]
    assert [(v["rubric_id"], v["status"], v["judge"]) for v in grade["verdicts"]] == [("r1", "met", "check"),
                                                                                     ("r2", "met", "check")]
    assert grade["score"] == 1.0 and grade["passed"] is True


@pytest.mark.slow
def test_task_graph_runs_a_suite_task_by_id_with_a_json_context(client: Any) -> None:
    """The docs' worked example (docs/how-to/langsmith-and-studio.md): the replay model on a sample follow-up task."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "task", input={"task_id": "fu-medical-labs"}, context={"model": "replay"})
    task = load_tasks("sample", task_id="fu-medical-labs")[0]
    [pending] = client.threads.get_state(thread)["interrupts"]
    assert pending["value"]["question"] == task.turns[0].golden_answer
    state = client.runs.wait(thread, "task", command={"resume": ""}, context={"model": "replay"})
    assert state["answers"] == [t.golden_answer for t in task.turns]
    assert [t["status"] for t in state["episode"]["turns"]] == ["asked_user", "answered"]
    assert state["episode"]["model"] == "replay"
    settings = state["episode"]["settings"]  # recorded as `vtb run` records an episode's settings
    # only the optional per-task limits (None: no limit, the default) may be None; every other setting is recorded
    unlimited = {name for name, f in EpisodeSettings.model_fields.items() if f.default is None}
    assert unlimited == {"task_timeout_s", "task_token_limit"}
    assert {k for k, v in settings.items() if v is None} == unlimited, settings
    assert settings["resumer"] == "scripted" and settings["graph"] == "task" and settings["strategy"] == "react"
    assert "python_image_processing" in settings["tools"] and settings["sandbox_isolation"] != "unknown"
    assert state["grade"]["passed"] is True and state["grade"]["score"] == 1.0
    assert [v["rubric_id"] for v in state["grade"]["verdicts"]] == [r.id for _, r in task.rubrics]


@pytest.mark.slow
def test_bad_inputs_fail_the_run_with_a_clear_error(client: Any) -> None:
    chat = {"messages": [user_message("What number is it?")]}
    cases = [
        ("task", {"task_id": "no-such-task"}, None, "task_id 'no-such-task': no such task in suite 'sample'"),
        ("region_switch", {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]}, None, "does not download"),
        ("grading", {"task": load_tasks("sample")[0].model_dump(mode="json"), "answers": []}, None,
         "one answer per turn"),
        # LangGraph builds the RunConfig context from the JSON itself: pydantic's error names the field
        ("temporal", chat, {"episode": {"max_tool_rounds": "many"}}, "episode.max_tool_rounds\n  Input should be"),
        ("hybrid_tool", chat, {"model": "replay"}, "use the 'task' graph"),
    ]
    started = []  # every run started first, each on a thread of its own (the server runs them side by side)
    for graph_id, payload, context, _ in cases:
        thread = client.threads.create()["thread_id"]
        started.append((thread, client.runs.create(thread, graph_id, input=payload, context=context)))
    for (thread, run), (_, _, _, expected) in zip(started, cases, strict=True):
        client.runs.join(thread, run["run_id"])
        assert client.runs.get(thread, run["run_id"])["status"] == "error"
        error = client.threads.get(thread)["error"]
        assert error["error"] in ("ValueError", "ValidationError") and expected in error["message"], error



def stream_task(client: Any, thread: str, **run: Any) -> list[Any]:
    return list(client.runs.stream(thread, "task", stream_mode=["messages", "updates"], stream_subgraphs=True, **run))


@pytest.mark.slow
def test_task_graph_streams_the_model_and_tool_messages_of_its_episode(client: Any) -> None:
    """Studio shows the episode's model tokens and tool results while the task graph's driver runs them."""
    thread = client.threads.create()["thread_id"]
    parts = stream_task(client, thread, input={"task": inline_follow_up_task()})
    parts += stream_task(client, thread, command={"resume": ""})
    nodes: dict[str, str] = {}
    final: dict[str, dict[str, Any]] = {}
    for part in parts:
        if part.event == "messages/metadata":
            nodes |= {key: value["metadata"]["langgraph_node"] for key, value in part.data.items()}
        elif part.event in ("messages/partial", "messages/complete"):
            final |= {message["id"]: message for message in part.data}
    streamed = [(nodes[key], message["type"], message["content"] if isinstance(message["content"], str) else "",
                 [call["name"] for call in message.get("tool_calls", [])]) for key, message in final.items()]
    model = [(kind, text, calls) for node, kind, text, calls in streamed if node == "model"]
    assert model == [("ai", QUESTION, []), ("ai", "", ["python_image_processing"]), ("ai", "Final answer: 42.", [])]
    tools = [text for node, kind, text, _ in streamed if kind == "tool"]
    assert len(tools) == 1 and '"ok": true' in tools[0] and "transformed_image_" in tools[0]
    assert any(p.event.startswith("updates|grading:") for p in parts)  # the grading graph's steps, as a subgraph


@pytest.mark.slow
def test_task_graph_streams_the_category_graph_updates_of_its_episode(client: Any) -> None:
    """The category graph is a subgraph of the task graph's run: Studio shows its model and tool steps."""
    thread = client.threads.create()["thread_id"]
    parts = stream_task(client, thread, input={"task": inline_follow_up_task()})
    parts += stream_task(client, thread, command={"resume": ""})
    inner = [p.data for p in parts if p.event.split("|")[:2] == ["updates", "episode"]]
    assert {"model", "vision_tools"} <= {node for update in inner for node in update}
