"""Image-safe LangSmith tracing: runs go through the real ``langsmith`` client to a local LangSmith
stand-in, and what it receives carries thumbnails, never the full base64 images."""

from __future__ import annotations

import base64
import copy
import io
import json
import re
from pathlib import Path

import langsmith
import langsmith.run_trees
import pytest
from conftest import write_task
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tracers.langchain import LangChainTracer
from langsmith import tracing_context
from support.langsmith_server import API_KEY, LangSmithStandIn, block_git, long_base64_runs, noise_png
from PIL import Image

from vtb_agents.episodes.driver import run_episode
from vtb_agents.models import ReplayChatModel
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tasks.local import load_task_dir
from vtb_agents.tools import select_tools
from vtb_agents.tracing import (
    THUMBNAIL_KEY,
    THUMBNAIL_SIDE,
    install_tracing,
    make_langsmith_client,
    scrub_images,
)

LIMIT = 40_000
"""No base64 run in what LangSmith receives may be longer than this (bytes)."""


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    block_git(monkeypatch)


def decoded_side(b64: str) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(b64))) as image:
        assert image.format == "JPEG"
        return image.size


def data_url_b64(url: str) -> str:
    match = re.fullmatch(r"data:image/jpeg;base64,(.+)", url)
    assert match, url[:80]
    return match.group(1)


def thumbnail_of(block: dict) -> tuple[str, dict]:
    """(thumbnail base64, original facts) of a traced image block (standard or OpenAI form)."""
    if block["type"] == "image_url":
        return data_url_b64(block["image_url"]["url"]), block["image_url"][THUMBNAIL_KEY]
    return block["base64"], block[THUMBNAIL_KEY]


def test_scrub_images_thumbnails_every_image_form_and_copies():
    data = noise_png(300, 200)
    b64 = base64.b64encode(data).decode()
    url = f"data:image/png;base64,{b64}"
    value = {"messages": [[
        {"type": "image", "base64": b64, "mime_type": "image/png"},                      # LangChain v1
        {"type": "image", "source_type": "base64", "data": b64, "mime_type": "image/png"},  # LangChain v0
        {"type": "image_url", "image_url": {"url": url, "detail": "high"}},                # OpenAI chat
        {"type": "input_image", "image_url": url},                                        # OpenAI responses
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}},  # Anthropic
        {"type": "text", "text": "short text stays"}, url, ("x", b64),
        {"type": "image_ref", "ref": "a" * 64, "name": "image_0.png"},
        {"blob": base64.b64encode(b"\0" * 60_000).decode()},                                # not an image
    ]]}
    before = copy.deepcopy(value)
    blocks = scrub_images(value)["messages"][0]
    assert value == before  # never modified in place
    v1, v0, chat, responses, anthropic, text, bare_url, pair, ref, blob = blocks
    for b64_thumb in (v1["base64"], v0["data"], data_url_b64(chat["image_url"]["url"]),
                      data_url_b64(responses["image_url"]), anthropic["source"]["data"], data_url_b64(bare_url),
                      pair[1]):
        assert max(decoded_side(b64_thumb)) == THUMBNAIL_SIDE
    assert v1["mime_type"] == v0["mime_type"] == anthropic["source"]["media_type"] == "image/jpeg"
    assert v1[THUMBNAIL_KEY]["original_width"] == 300 and v1[THUMBNAIL_KEY]["original_height"] == 200
    assert v1[THUMBNAIL_KEY]["original_bytes"] == len(data) and v1[THUMBNAIL_KEY]["original_mime_type"] == "image/png"
    assert chat["image_url"]["detail"] == "high" and THUMBNAIL_KEY in chat["image_url"]
    assert text == before["messages"][0][5] and ref == before["messages"][0][8]
    assert blob["blob"].startswith("[vtb: 80000 characters of base64 omitted")
    assert isinstance(pair, tuple)


def test_make_langsmith_client_scrubs_inputs_and_outputs_and_keeps_env_hiding(monkeypatch):
    client = make_langsmith_client(api_url="http://127.0.0.1:9", api_key=API_KEY, auto_batch_tracing=False)
    assert client._hide_inputs is scrub_images and client._hide_outputs is scrub_images  # what the client calls
    monkeypatch.setenv("LANGSMITH_HIDE_INPUTS", "true")
    hidden = make_langsmith_client(api_url="http://127.0.0.1:9", api_key=API_KEY, auto_batch_tracing=False,
                                   anonymizer=lambda data: {**data, "anonymized": True})
    assert hidden._hide_inputs is True
    b64 = base64.b64encode(noise_png(200, 100)).decode()
    anonymized = hidden._anonymizer({"image": {"type": "image", "base64": b64}})
    assert anonymized["anonymized"] and max(decoded_side(anonymized["image"]["base64"])) == THUMBNAIL_SIDE


def big_image_task(root: Path):
    """The conftest task with an 800x600 noise image (its text and trajectory are unchanged)."""
    folder = write_task(root, "t-big")
    (folder / "image_0.png").write_bytes(noise_png())
    return load_task_dir(folder)


def llm_images(run: dict) -> list[dict]:
    """The image blocks in an LLM run's (serialised) input messages."""
    found = []
    for batch in run["inputs"]["messages"]:
        for message in batch:
            content = message["kwargs"]["content"]
            found += [b for b in content if isinstance(b, dict) and b.get("type") in ("image", "image_url")]
    return found


@pytest.mark.parametrize("zstd", [True, False], ids=["zstd-multipart", "plain-multipart"])
def test_episode_traced_through_the_installed_client_is_image_safe(tmp_path, artifacts, monkeypatch, zstd):
    task = big_image_task(tmp_path)
    monkeypatch.setattr(langsmith.run_trees, "_CLIENT", langsmith.run_trees._CLIENT)  # restored afterwards
    with LangSmithStandIn(zstd=zstd) as server:
        client = install_tracing(make_langsmith_client(api_url=server.url, api_key=API_KEY))
        with tracing_context(enabled=True, project_name="vtb-tests"), open_sandbox("local") as sandbox:
            episode = run_episode(task, ReplayChatModel(task=task), select_tools(), sandbox=sandbox,
                                  artifacts=artifacts, model_name="replay")
        client.flush()
        client.cleanup()
    assert server.errors == []
    assert episode.turns[0].answer == "The number is 42."
    (root,) = server.root_runs()
    assert root["name"] == f"vtb:{task.id}" and root["session_name"] == "vtb-tests"
    assert set(root["tags"]) == {task.category, task.domain, "replay", "strategy:react", "prompt:high",
                                 "history:golden"}
    metadata = root["extra"]["metadata"]
    assert {k: metadata[k] for k in ("task_id", "category", "domain", "model")} == {
        "task_id": task.id, "category": task.category, "domain": task.domain, "model": "replay"}
    assert root["outputs"] and root["end_time"]
    llm_runs = server.runs_of("llm")
    assert len(llm_runs) == 2  # the tool call, then the answer
    assert all(r["trace_id"] == root["id"] for r in server.runs.values())
    first, second = ([thumbnail_of(b) for b in llm_images(run)] for run in llm_runs)
    # each call re-sends the conversation's images: the task image, then also the tool's 240x160 crop
    assert [(f["original_width"], f["original_height"]) for _, f in first] == [(800, 600)]
    assert [(f["original_width"], f["original_height"]) for _, f in second] == [(800, 600), (240, 160)]
    assert all(max(decoded_side(b64)) <= THUMBNAIL_SIDE for b64, _ in first + second)
    assert server.ingested and all(long_base64_runs(body, LIMIT) == [] for body in server.ingested)


def test_the_image_safe_client_sends_thumbnails_where_a_plain_client_sends_the_images():
    b64 = base64.b64encode(noise_png(seed=1)).decode()
    message = HumanMessage(content=[{"type": "text", "text": "What is this?"},
                                    {"type": "image", "base64": b64, "mime_type": "image/png"}])
    model = ScriptedChatModel(replies=[AIMessage("noise"), AIMessage("noise")])
    with LangSmithStandIn() as server:
        scrubbing = make_langsmith_client(api_url=server.url, api_key=API_KEY)
        tracer = LangChainTracer(project_name="vtb-callbacks", client=scrubbing)
        model.invoke([message], {"callbacks": [tracer], "run_name": "scrubbed"})
        scrubbing.flush()
        plain = langsmith.Client(api_url=server.url, api_key=API_KEY)  # control: what LangSmith would get
        tracer = LangChainTracer(project_name="vtb-plain", client=plain)
        model.invoke([message], {"callbacks": [tracer], "run_name": "plain"})
        plain.flush()
        for client in (scrubbing, plain):
            client.cleanup()
    assert server.errors == []
    runs = {r["name"]: r for r in server.runs_of("llm")}
    assert runs["scrubbed"]["session_name"] == "vtb-callbacks" and runs["plain"]["session_name"] == "vtb-plain"
    assert THUMBNAIL_KEY in json.dumps(runs["scrubbed"]["inputs"])
    assert len(json.dumps(runs["scrubbed"]["inputs"])) < 20_000 < 1_000_000 < len(json.dumps(runs["plain"]["inputs"]))
    assert any(long_base64_runs(body, LIMIT) for body in server.ingested)  # the control run's
