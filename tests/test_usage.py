"""Tokens and cost: a run against a local server that reports usage sums exactly what it reported,
for the model and the judge apart, per task and per run; costs come from the presets' prices."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from conftest import write_task
from support.openai_server import OpenAIServer
from test_presets import vtb
from vtb_agents.analysis.cost import cost_of
from vtb_agents.models.presets import presets
from vtb_agents.models.usage import set_turn, track_usage
from vtb_agents.results import TokenUsage

FIELDS = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "total_tokens": "total_tokens"}


class UsageServer:
    """Answers the model with the golden answer and the judge with a verdict; every reply reports a
    different usage (with cached and reasoning tokens), kept per side."""

    def __init__(self, judge_model: str) -> None:
        self.judge_model, self.counter, self.lock = judge_model, itertools.count(1), threading.Lock()
        self.reported: dict[str, list[dict]] = {"model": [], "judge": []}

    def __call__(self, body: dict) -> dict:
        n = next(self.counter)
        usage = {"prompt_tokens": 1000 + 7 * n, "completion_tokens": 50 + n, "total_tokens": 1050 + 8 * n,
                 "prompt_tokens_details": {"cached_tokens": 100 * (n % 3)},
                 "completion_tokens_details": {"reasoning_tokens": 20 * (n % 2)}}
        side = "judge" if body["model"] == self.judge_model else "model"
        with self.lock:
            self.reported[side].append(usage)
        content = (json.dumps({"verdict": "met", "justification": "Concise."}) if side == "judge"
                   else "The number is 42.")
        return {"content": content, "usage": usage}

    def total(self, side: str) -> dict[str, int]:
        rows = self.reported[side]
        sums = {ours: sum(r[theirs] for r in rows) for ours, theirs in FIELDS.items()}
        sums["cached_tokens"] = sum(r["prompt_tokens_details"]["cached_tokens"] for r in rows)
        sums["reasoning_tokens"] = sum(r["completion_tokens_details"]["reasoning_tokens"] for r in rows)
        batch = dict.fromkeys(("batch_calls", "batch_input_tokens", "batch_cached_tokens", "batch_cache_write_tokens",
                               "batch_output_tokens"), 0)  # no call was billed at the batch rate
        return {"calls": len(rows), "calls_without_usage": 0, "cache_write_tokens": 0, **sums, **batch}


@pytest.mark.slow
def test_run_usage_equals_what_the_server_reported_and_costs_follow_the_presets(tmp_path):
    root = tmp_path / "tasks"
    for task_id in ("a", "b", "c"):  # distinct prompts, so that no judge verdict comes from the cache
        task_file = write_task(root, task_id) / "task.json"
        task_file.write_text(task_file.read_text().replace("What number", f"In {task_id}, what number"))
    server_model = UsageServer(judge_model="o4-mini")
    with OpenAIServer(server_model) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"}
        done = vtb("run", "--tasks", str(root), "--model", "gpt-4o", "--judge", "o4-mini", "--concurrency", "2",
                   "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    model, judge = server_model.total("model"), server_model.total("judge")
    assert model["calls"] == 3 and judge["calls"] == 3  # one model call and one judged rubric (r2) per task
    assert summary["usage"]["model"] == model and summary["usage"]["judge"] == judge
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert all(r["usage"]["model"]["calls"] == r["usage"]["judge"]["calls"] == 1 for r in results)  # per task
    assert sum(r["usage"]["model"]["input_tokens"] for r in results) == model["input_tokens"]
    assert sum(r["usage"]["judge"]["output_tokens"] for r in results) == judge["output_tokens"]
    # list prices in USD per million tokens (input, cached input, output): gpt-4o 2.50 / 1.25 / 10.00,
    # o4-mini 1.10 / 0.275 / 4.40
    expect_model = ((model["input_tokens"] - model["cached_tokens"]) * 2.5
                    + model["cached_tokens"] * 1.25 + model["output_tokens"] * 10.0) / 1e6
    expect_judge = ((judge["input_tokens"] - judge["cached_tokens"]) * 1.1
                    + judge["cached_tokens"] * 0.275 + judge["output_tokens"] * 4.4) / 1e6
    cost = summary["cost"]
    assert abs(cost["model"] - expect_model) < 1e-6 and abs(cost["judge"] - expect_judge) < 1e-6
    assert summary["apr"] == 1.0 and abs(cost["per_passed_task"] - (expect_model + expect_judge) / 3) < 1e-6
    shown = vtb("compare", str(tmp_path / "run"))
    assert shown.returncode == 0 and f"${cost['total']:,.4f}" in shown.stdout
    assert "Tokens and cost" in (tmp_path / "run" / "report.html").read_text()


@pytest.mark.slow
def test_a_model_without_prices_or_usage_has_unknown_cost_not_zero(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, "a")
    done = vtb("run", "--tasks", str(root), "--model", "replay", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["usage"]["model"]["calls_without_usage"] == summary["usage"]["model"]["calls"] > 0
    assert summary["cost"]["model"] is None and summary["cost"]["total"] is None
    assert summary["cost"]["judge"] == 0.0  # the rule judge made no call: a known zero
    assert "unknown" in vtb("compare", str(tmp_path / "run")).stdout
    assert cost_of(TokenUsage(calls=1, input_tokens=10, output_tokens=5), presets()["llama-4-scout"].prices) is None


def test_usage_is_summed_per_turn_when_the_driver_sets_the_turn():
    with OpenAIServer(lambda body: {"content": "ok", "usage": {"prompt_tokens": 3 + len(body["messages"]),
                                                               "completion_tokens": 2, "total_tokens": 0}}) as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)
        with track_usage() as tracker:
            set_turn(0)
            model.invoke([HumanMessage("one")])
            set_turn(1)
            model.invoke([HumanMessage("two"), HumanMessage("three")])
            model.invoke([HumanMessage("four")])
            model.invoke([HumanMessage("five")], {"metadata": {"vtb_turn": 4}})  # run metadata wins
        model.invoke([HumanMessage("outside the block")])
    assert tracker.total.calls == 4 and tracker.total.input_tokens == 4 + 5 + 4 + 4
    assert {k: v.input_tokens for k, v in tracker.by_turn.items()} == {0: 4, 1: 9, 4: 4}
