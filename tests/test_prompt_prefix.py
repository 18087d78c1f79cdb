"""Requests laid out for prompt caching, and kept so (docs/concepts/prompt-caching.md).

Within an episode every model request extends the one before it, read on the wire: a real
ChatOpenAI client (through ``vtb_agents``' own model spec, or a user's ``create_agent`` agent)
against the local chat-completions server (tests/support/openai_server.py), which keeps every request body.
"Extends" is :func:`extends`: the same request fields (model, settings, tool schemas) apart from
``messages`` and ``tool_choice``, and the earlier request's messages a strict prefix of the later's.

The scripted model makes two tool rounds per turn (a crop, then a calculator call) before it answers,
on a three-turn task, so every kind of step (turn openings under golden history, tool rounds with
images, strategy steps without tools, the round cap) is between two checked requests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.openai_server import OpenAIServer
from support.scripted_vision import _image_names, _is_observation, _texts

from vtb_agents.config import run_config
from vtb_agents.runner.run import run_suite
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]
TASK = "te-physics-gauge"  # three turns, an image each
CROP = "from PIL import Image\nImage.open('{name}').crop((0, 0, 300, 200)).save('transformed_image_{n}.png')"
ZOOM_SOURCES = re.compile(r"Sources are the images: ([^\s]+(?:, [^\s]+)*)\.")
REFINE = "For the zoomed views just shown"

UNCHANGED = "messages", "tool_choice"
"""Request fields that may change from one request to the next; every other one must not."""


def extends(earlier: dict, later: dict) -> list[str]:
    """What keeps the chat-completions request ``later`` from extending ``earlier`` (empty if it does).

    ``later`` extends ``earlier`` when every request field but ``messages`` and ``tool_choice`` is
    equal (model, sampling settings, tool schemas), and ``earlier["messages"]`` is a strict prefix
    of ``later["messages"]``: the system prompt, tools, images and earlier turns in the same bytes and
    order, new content only appended. ``tool_choice`` may change (a step that must not call tools
    keeps the tools and sets ``"none"``)."""
    problems = [f"field {key!r} changed" for key in sorted(set(earlier) | set(later))
                if key not in UNCHANGED and earlier.get(key) != later.get(key)]
    before, after = earlier["messages"], later["messages"]
    if len(after) <= len(before):
        problems.append(f"{len(after)} messages after {len(before)}")
    for index, (old, new) in enumerate(zip(before, after)):
        if old != new:
            problems.append(f"message {index} ({old.get('role')}) rewritten")
            break
    return problems


class TwoRounds:
    """A scripted vision model: per turn (and per strategy request) a crop of the newest task image,
    then a calculator call, then the answer; plain text when the request allows no tool call, and
    for zoom's proposals a region of the turn's first image, then no sub-regions."""

    def __init__(self) -> None:
        self.saved = 0

    def __call__(self, body: dict) -> object:
        texts = [t for m in body["messages"] for t in _texts(m)]
        if not body.get("tools") or body.get("tool_choice") == "none":
            asked = next((t for t in reversed(texts) if ZOOM_SOURCES.search(t) or REFINE in t), "")
            sources = ZOOM_SOURCES.search(asked)
            if sources:
                first = sources.group(1).split(", ")[0]
                return json.dumps({"regions": [{"source": first, "box": [0, 0, 0.5, 0.5], "confidence": 0.3}]})
            return '{"regions": []} The plan: crop, then compute.'
        last = body["messages"][-1]
        if last["role"] != "tool" and not _is_observation(last):  # a turn, a strategy's request, zoom's proposal
            newest = max(_image_names(body), key=lambda n: int(n.split("_")[1].split(".")[0]))
            self.saved += 1
            return {"tool_calls": [{"name": "python_image_processing",
                                    "arguments": {"code": CROP.format(name=newest, n=self.saved - 1)}}]}
        calls = [c["function"]["name"] for m in body["messages"] if m["role"] == "assistant"
                 for c in m.get("tool_calls") or []]
        if calls and calls[-1] == "python_image_processing":
            return {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}
        return "Final answer: 42."


def run_episode_on_the_wire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ended: str = "answered",
                            **options: object) -> list[dict]:
    """Run the three-turn task with ``options`` against the scripted server; the requests it got."""
    (task,) = [t for t in load_tasks("sample") if t.id == TASK]
    with OpenAIServer(TwoRounds()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("VTB_EXAMPLE_MODEL", "openai:vision-test")
        run_suite([task], run_config(tasks="sample", judge="rule", **options), tmp_path / "run")
    (result,) = ResultsStore(tmp_path / "run").load()[0]
    assert result.episode.status == "completed", result.episode.error
    assert [t.status for t in result.episode.turns] == [ended] * 3
    return server.requests


def assert_every_request_extends_the_one_before(requests: list[dict]) -> None:
    for number, (earlier, later) in enumerate(zip(requests, requests[1:]), start=2):
        assert extends(earlier, later) == [], f"request {number} of {len(requests)}"


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["react", "zoom", "marks", "plan", "reflect"])
def test_every_request_of_a_multi_turn_episode_extends_the_one_before(strategy, tmp_path, monkeypatch):
    requests = run_episode_on_the_wire(tmp_path, monkeypatch, model="openai:vision-test", strategy=strategy)
    calls = [c["function"]["name"] for m in requests[-1]["messages"] for c in m.get("tool_calls") or []]
    assert calls.count("python_image_processing") >= 3 and calls.count("calculator") >= 3  # two rounds a turn
    assert_every_request_extends_the_one_before(requests)


@pytest.mark.slow
def test_the_round_cap_keeps_the_prefix(tmp_path, monkeypatch):
    """At the cap (one round a turn here) the last call is made with the same tools, ``tool_choice`` none."""
    requests = run_episode_on_the_wire(tmp_path, monkeypatch, "tool_round_cap", model="openai:vision-test",
                                       max_tool_rounds=1)
    assert [r.get("tool_choice") for r in requests].count("none") == 3  # one capped answer per turn
    assert_every_request_extends_the_one_before(requests)


@pytest.mark.slow
def test_an_agent_runs_requests_extend_the_one_before(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    requests = run_episode_on_the_wire(tmp_path, monkeypatch, model="agent:examples.create_agent_example:build")
    assert len(requests) == 9  # three requests a turn: crop, calculator, answer
    assert_every_request_extends_the_one_before(requests)


def test_extends_names_what_breaks_the_prefix():
    first = {"model": "m", "tools": [{"name": "a"}], "messages": [{"role": "system", "content": "s"},
                                                                  {"role": "user", "content": "q"}]}
    longer = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "x"}]}
    assert extends(first, longer) == [] and extends(first, {**longer, "tool_choice": "none"}) == []
    assert extends(first, {**longer, "tools": [{"name": "b"}]}) == ["field 'tools' changed"]
    assert extends(longer, first) == ["2 messages after 3"]
    rewritten = {**longer, "messages": [{"role": "system", "content": "s2"}, *longer["messages"][1:]]}
    assert extends(first, rewritten) == ["message 0 (system) rewritten"]
