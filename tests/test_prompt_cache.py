"""Prompt-cache breakpoints for Anthropic models, and the cached tokens the provider reports, on the wire
(docs/concepts/prompt-caching.md).

A real ChatAnthropic client (the ``claude-sonnet-4`` preset) runs a three-turn task against a local
server speaking Anthropic's Messages API, which plays a model that crops once a turn and answers, and
reports cache reads and writes per call. Every request carries at most four ``cache_control``
breakpoints: on the system prompt (tools and system), on the message where the previous request
ended, and on its last message; with ``prompt_cache`` off, none. Every request extends the one before
(breakpoints aside). The run's usage sums what the server reported, and its cost, cache share and
saving equal a hand computation at the preset's prices.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from typing import Any

import pytest

from support.servers import LocalServer, Reply, Request
from test_prompt_prefix import extends

from vtb_agents.config import run_config
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks

TASK = "te-physics-gauge"  # three turns, an image each
CROP = "from PIL import Image\nImage.open('{name}').crop((0, 0, 300, 200)).save('transformed_image_{n}.png')"


def texts(message: dict) -> list[str]:
    content = message["content"]
    return [content] if isinstance(content, str) else [b["text"] for b in content if b.get("type") == "text"]


class ClaudeStandIn:
    """Anthropic's Messages API as a scripted model: a crop of the turn's newest image, then the answer.
    Call n reports 100 + n uncached input tokens, 1000 * n cache reads, 200 cache writes and 20 output."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.usages: list[dict[str, int]] = []
        self.counter, self.lock = itertools.count(1), threading.Lock()

    def __call__(self, request: Request) -> Reply:
        body = request.json()
        n = next(self.counter)
        usage = {"input_tokens": 100 + n, "cache_read_input_tokens": 1000 * n, "cache_creation_input_tokens": 200,
                 "output_tokens": 20}
        with self.lock:
            self.bodies.append(body)
            self.usages.append(usage)
        last = body["messages"][-1]
        after_tool = isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"])
        if after_tool:
            content, stop = [{"type": "text", "text": "Final answer: 42."}], "end_turn"
        else:
            names = [t.strip("[]") for m in body["messages"] for t in texts(m)
                     if re.fullmatch(r"\[image_\d+\.png\]", t)]
            newest = max(names, key=lambda name: int(name.split("_")[1].split(".")[0]))
            code = CROP.format(name=newest, n=n)
            content, stop = [{"type": "tool_use", "id": f"toolu_{n}", "name": "python_image_processing",
                              "input": {"code": code}}], "tool_use"
        return Reply(body={"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"],
                           "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage})


def breakpoints(value: Any, path: str = "") -> list[str]:
    """Where ``cache_control`` sits in a request body (JSON paths)."""
    if isinstance(value, dict):
        here = [path] if "cache_control" in value else []
        return here + [p for k, v in value.items() for p in breakpoints(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in breakpoints(v, f"{path}[{i}]")]
    return []


def without_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_breakpoints(v) for v in value]
    return value


def last_block(message: dict) -> str:
    return f"[{len(message['content']) - 1}]" if isinstance(message["content"], list) else ""


def run_claude(tmp_path, monkeypatch, **options: object) -> tuple[ClaudeStandIn, dict]:
    (task,) = [t for t in load_tasks("sample") if t.id == TASK]
    model = ClaudeStandIn()
    with LocalServer() as server:
        server.route("/v1/messages", model, method="POST")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url(""))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        summary = run_suite([task], run_config(model="claude-sonnet-4", tasks="sample", judge="rule", **options),
                            tmp_path / "run")
    assert server.errors == []
    (result,) = ResultsStore(tmp_path / "run").load()[0]
    assert [t.status for t in result.episode.turns] == ["answered"] * 3, result.episode.error
    assert len(model.bodies) == 6  # a crop and an answer per turn
    return model, summary


@pytest.mark.slow
def test_breakpoints_sit_on_the_system_prompt_the_previous_end_and_the_last_message(tmp_path, monkeypatch):
    model, _ = run_claude(tmp_path, monkeypatch)
    for number, body in enumerate(model.bodies, start=1):
        marks = breakpoints(body)
        assert len(marks) <= 4, (number, marks)
        messages = body["messages"]
        expected = {f".system[{len(body['system']) - 1}]",
                    f".messages[{len(messages) - 1}].content{last_block(messages[-1])}"}
        replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        if replies:  # where the previous request ended: the message before the newest reply
            before = replies[-1] - 1
            expected.add(f".messages[{before}].content{last_block(messages[before])}")
        assert set(marks) == expected, (number, marks)
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    clean = [without_breakpoints(body) for body in model.bodies]
    for number, (earlier, later) in enumerate(zip(clean, clean[1:]), start=2):
        assert extends(earlier, later) == [], f"request {number}"


@pytest.mark.slow
def test_prompt_cache_off_sends_no_breakpoint(tmp_path, monkeypatch):
    model, _ = run_claude(tmp_path, monkeypatch, prompt_cache=False)
    assert [breakpoints(body) for body in model.bodies] == [[]] * 6


@pytest.mark.slow
def test_cache_reads_and_writes_arrive_in_usage_and_cost_equals_a_hand_computation(tmp_path, monkeypatch):
    model, summary = run_claude(tmp_path, monkeypatch)
    reported = model.usages
    # Calls 1..6 report uncached input 101..106, cache reads 1000..6000, 200 writes each, 20 output each.
    assert sum(u["input_tokens"] for u in reported) == 621
    assert sum(u["cache_read_input_tokens"] for u in reported) == 21_000
    usage = summary.usage.model
    assert (usage.calls, usage.cached_tokens, usage.cache_write_tokens) == (6, 21_000, 1_200)
    assert (usage.input_tokens, usage.output_tokens) == (621 + 21_000 + 1_200, 120)
    # claude-sonnet-4, USD per million tokens: input 3.00, cache read 0.30, cache write 3.75, output 15.00
    # 621 x 3.00 + 21,000 x 0.30 + 1,200 x 3.75 + 120 x 15.00 = 1,863 + 6,300 + 4,500 + 1,800 = 14,463 -> $0.014463
    assert summary.cost.model == 0.014463
    # The cache served 21,000 of 22,821 input tokens and saved 21,000 x (3.00 - 0.30) = 56,700 -> $0.0567.
    cache = summary.prompt_cache.model
    assert cache.share == round(21_000 / 22_821, 6) and cache.saving == 0.0567
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["prompt_cache"]["model"] == cache.model_dump()
