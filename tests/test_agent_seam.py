"""One seam for every agent: a user's create_agent sees what our graph's model sees, on the wire.

The example agent (examples/create_agent_example.py) runs through the real ``vtb`` command against
a local OpenAI-compatible server; the assertions are on what the server received.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel, _images, _texts
from support.cli import openai_env, vtb
from vtb_agents.graphs.prompts import system_prompt
from vtb_agents.strategies.agent import factory_keywords, load_agent
from vtb_agents.strategies.observe import show_tool_images

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["rs-finance-invoice", "te-generalist-map", "pr-maths-plot"]


def run_cli(out: Path, server: OpenAIServer, *args: str, tasks: list[str] = TASKS) -> subprocess.CompletedProcess:
    return vtb("run", "--tasks", "sample", "--out", out, "--judge", "rule",
               *(a for t in tasks for a in ("--task-id", t)),
               *args, cwd=ROOT, env=openai_env(server.base_url, VTB_EXAMPLE_MODEL="openai:vision-test"))


def vision_followups(requests: list[dict]) -> list[list[dict]]:
    """For each request that follows a vision call, the messages after that call."""
    found = []
    for body in requests:
        messages = body["messages"]
        calls = [i for i, m in enumerate(messages) if m["role"] == "assistant" and any(
            c["function"]["name"] == "python_image_processing" for c in m.get("tool_calls") or [])]
        if calls and calls[-1] >= len(messages) - 3:
            found.append(messages[calls[-1] + 1:])
    return found


@pytest.mark.slow
@pytest.mark.parametrize("model", ["agent:examples.create_agent_example:build", "openai:vision-test"])
def test_the_transformed_image_follows_every_vision_call(model, tmp_path):
    with OpenAIServer(VisionModel()) as server:
        done = run_cli(tmp_path / "run", server, "--model", model)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    turns = sum(len(line["episode"]["turns"]) for line in lines)
    followups = vision_followups(server.requests)
    assert turns >= 5 and len(followups) == turns  # the scripted model makes one vision call per turn
    for after in followups:
        assert [m["role"] for m in after] == ["tool", "user"]
        assert json.loads(after[0]["content"])["new_images"][0].startswith("transformed_image_")
        assert [im.size for im in _images(after[1])] == [(300, 200)]
    # The system prompt of the chosen level reached the model in every request.
    for body in server.requests:
        systems = [m for m in body["messages"] if m["role"] == "system"]
        assert [_texts(m) for m in systems] == [[system_prompt("high")]]
    run = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    expected = model if model.startswith("agent:") else "react"
    assert {line["strategy"] for line in lines} == {expected}
    assert all(line["episode"]["settings"]["strategy"] == expected for line in lines)
    assert run["strategy"] == "react" and run["model"] == model


@pytest.mark.slow
def test_the_prompt_level_reaches_a_user_agent(tmp_path):
    with OpenAIServer(VisionModel()) as server:
        done = run_cli(tmp_path / "run", server, "--model", "agent:examples.create_agent_example:build",
                       "--prompt-level", "low", "--task-id", "rs-finance-invoice")
    assert done.returncode == 0, done.stderr[-2000:]
    first = server.requests[0]["messages"][0]
    assert first["role"] == "system" and _texts(first) == [system_prompt("low")]


def test_an_agent_without_prompt_or_middleware_gets_the_prompt_as_a_system_message(tmp_path, monkeypatch):
    (tmp_path / "plain_agent.py").write_text(
        "from langchain.agents import create_agent\n"
        "from langchain_openai import ChatOpenAI\n"
        "def build(tools):\n"
        "    return create_agent(ChatOpenAI(model='m', temperature=0), tools)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert factory_keywords(load_agent("agent:plain_agent:build")) == set()
    from vtb_agents.runner.run import RunConfig, run_suite
    from vtb_agents.tasks import load_tasks

    task = [t for t in load_tasks("sample") if t.id == "rs-finance-invoice"]
    with OpenAIServer(lambda body: "42") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        summary = run_suite(task, RunConfig(model="agent:plain_agent:build", tasks="sample"), tmp_path / "run")
    assert summary.graded == 1
    assert [_texts(m) for m in server.requests[0]["messages"] if m["role"] == "system"] == [[system_prompt("high")]]


def test_show_tool_images_inserts_one_observation_per_round_and_is_idempotent():
    image = {"name": "transformed_image_0.png", "ref": "a" * 64, "size": [4, 4]}
    conversation = [
        HumanMessage("q", id="turn-0"),
        AIMessage("", tool_calls=[{"name": "python_image_processing", "args": {}, "id": "1"},
                                  {"name": "calculator", "args": {}, "id": "2"}]),
        ToolMessage("ok", tool_call_id="1", artifact={"images": [image]}),
        ToolMessage("4", tool_call_id="2"),
        AIMessage("", tool_calls=[{"name": "calculator", "args": {}, "id": "3"}]),
        ToolMessage("5", tool_call_id="3"),
        AIMessage("done"),
    ]
    shown = show_tool_images(conversation)
    kinds = [type(m).__name__ for m in shown]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "HumanMessage", "AIMessage",
                     "ToolMessage", "AIMessage"]
    assert shown[4].content[2] == {"type": "image_ref", "ref": "a" * 64, "name": "transformed_image_0.png"}
    assert show_tool_images(shown) == shown
