"""The category graphs driven through ChatOpenAI against a local chat-completions server.

The server plays a scripted vision model; the assertions are on what it *received*: image parts,
transformed images after vision calls, legal message order, earlier turns' images in later
temporal turns, and the follow-up turn arriving after the clarifying question.
"""

from __future__ import annotations

import io
import json

import pytest
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from PIL import Image
from support.scripted_vision import QUESTION, VisionModel, _image_names, _images, _texts

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.episodes.driver import run_episode
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tasks import load_tasks
from vtb_agents.tools import select_tools


def assert_legal_order(messages: list[dict]) -> None:
    """Every assistant tool call is answered by tool messages before any other role speaks."""
    for i, message in enumerate(messages):
        calls = [c["id"] for c in message.get("tool_calls") or []]
        if calls:
            following = messages[i + 1:i + 1 + len(calls)]
            assert [m["role"] for m in following] == ["tool"] * len(calls), [m["role"] for m in messages]
            assert sorted(m["tool_call_id"] for m in following) == sorted(calls)


@pytest.fixture
def sample():
    return {t.id: t for t in load_tasks("sample")}


def run_with_server(task, responder, tmp_path, *, streaming=False):
    with OpenAIServer(responder) as server, open_sandbox("local") as sandbox:
        model = ChatOpenAI(model="vision-test", base_url=server.base_url, api_key="k", temperature=0,
                           streaming=streaming, max_retries=0)
        episode = run_episode(task, model, select_tools(), sandbox=sandbox,
                              artifacts=ArtifactStore(tmp_path / "artifacts"), model_name="openai:vision-test")
    return episode, server.requests


@pytest.mark.parametrize("streaming", [False, True])
def test_temporal_task_over_the_wire(sample, tmp_path, streaming):
    task = sample["te-physics-gauge"]
    episode, requests = run_with_server(task, VisionModel(), tmp_path, streaming=streaming)
    assert [t.status for t in episode.turns] == ["answered"] * 3
    assert len(requests) == 6 and all(r["model"] == "vision-test" for r in requests)
    assert [bool(r.get("stream")) for r in requests] == [streaming] * 6
    for body in requests:
        assert_legal_order(body["messages"])
        assert body["messages"][0]["role"] == "system"
        assert {t["function"]["name"] for t in body["tools"]} >= {"python_image_processing", "calculator"}
    # Turn 1: the task image arrives as an image part of the user message, at full size.
    size = Image.open(io.BytesIO(task.images[0].read_bytes())).size
    first_user = next(m for m in requests[0]["messages"] if m["role"] == "user")
    assert [im.size for im in _images(first_user)] == [size]
    # After the vision call, the transformed image follows the tool result as a user image part.
    after = requests[1]["messages"]
    assert [m["role"] for m in after[-3:]] == ["assistant", "tool", "user"]
    assert json.loads(after[-2]["content"])["new_images"] == ["transformed_image_0.png"]
    assert [im.size for im in _images(after[-1])] == [(300, 200)]
    # Turn 3 still carries the images of turns 1 and 2 (and their crops), plus its own.
    last_turn = requests[4]["messages"]
    user_images = [im.size for m in last_turn if m["role"] == "user" for im in _images(m)]
    assert user_images.count(size) == 3 and user_images.count((300, 200)) == 2
    assert _image_names(requests[4]) == ["image_0.png", "image_1.png", "image_2.png"]
    # The golden history replaced the model's earlier answers.
    assistant_texts = [m["content"] for m in last_turn if m["role"] == "assistant" and m.get("content")]
    assert assistant_texts == [task.turns[0].golden_answer, task.turns[1].golden_answer]


def test_follow_up_turn_arrives_after_the_clarifying_question(sample, tmp_path):
    task = sample["fu-generalist-shelf"]
    episode, requests = run_with_server(task, VisionModel(ask_first=True), tmp_path)
    assert [t.status for t in episode.turns] == ["asked_user", "answered", "answered"]
    assert episode.turns[0].answer == QUESTION
    second = requests[1]["messages"]
    assert [m["role"] for m in second[-2:]] == ["assistant", "user"]
    assert second[-2]["content"] == task.turns[0].golden_answer  # golden history rewrote the question
    assert _texts(second[-1]) == [task.turns[1].prompt]
    for body in requests:
        assert_legal_order(body["messages"])


def test_run_through_init_chat_model_and_openai_base_url(sample, tmp_path, monkeypatch):
    tasks = [sample["rs-finance-invoice"], sample["te-generalist-map"]]
    with OpenAIServer(VisionModel()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        summary = run_suite(tasks, RunConfig(model="openai:vision-test", tasks="sample"), tmp_path / "run")
    results, _ = ResultsStore(tmp_path / "run").load()
    assert [r.episode.status for r in results] == ["completed", "completed"]
    assert summary.tool_metrics.by_tool == {"python_image_processing": 3}
    assert summary.graded == 2 and summary.apr == 0.0  # "42" is not the invoice's answer
    assert all(r["temperature"] == 0 for r in server.requests)


def test_max_image_side_downscales_what_the_model_receives(sample, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from vtb_agents.cli import app

    with OpenAIServer(lambda body: "42") as server:
        result = CliRunner().invoke(app, ["run", "--task-id", "rs-finance-invoice", "--model", "openai:m",
                                          "--max-image-side", "400", "--out", str(tmp_path / "run")],
                                    env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"})
    assert result.exit_code == 0, result.output
    user = next(m for m in server.requests[0]["messages"] if m["role"] == "user")
    assert [im.size for im in _images(user)] == [(400, 300)]
