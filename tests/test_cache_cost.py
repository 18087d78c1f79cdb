"""The share of input served from the provider's prompt cache, the money it saved, and the price of
batch-rate tokens, through the real ``vtb`` CLI against a local server (docs/how-to/cost-and-rate-limits.md).

The server reports cached tokens on every call, and answers the agent model on the service tier the
request asked for (``--model-kwargs '{"service_tier": "flex"}'``, which OpenAI bills at its Batch API
rates). summary.json, the report and ``vtb compare`` give the numbers computed here by hand from the
presets' list prices.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import write_task
from support.openai_server import OpenAIServer
from test_presets import vtb

JUDGE = "o4-mini"


def respond(body: dict) -> dict:
    """The model answers at once (2,000 input tokens, 1,600 of them cached, 100 output, on the tier it was
    asked for); the judge finds the rubric met (1,000 input, 400 cached, 50 output)."""
    if body["model"] == JUDGE:
        usage = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050,
                 "prompt_tokens_details": {"cached_tokens": 400}}
        return {"content": json.dumps({"verdict": "met", "justification": "Concise."}), "usage": usage}
    usage = {"prompt_tokens": 2000, "completion_tokens": 100, "total_tokens": 2100,
             "prompt_tokens_details": {"cached_tokens": 1600}}
    return {"content": "The number is 42.", "usage": usage, "service_tier": body.get("service_tier")}


@pytest.mark.slow
def test_cache_share_saving_and_flex_cost_equal_a_hand_computation(tmp_path):
    root = tmp_path / "tasks"
    for task_id in ("a", "b"):  # distinct prompts: no verdict comes from the judge cache
        task_file = write_task(root, task_id) / "task.json"
        task_file.write_text(task_file.read_text().replace("What number", f"In {task_id}, what number"))
    with OpenAIServer(respond) as server:
        done = vtb("run", "--tasks", str(root), "--model", "gpt-5", "--model-kwargs", '{"service_tier": "flex"}',
                   "--judge", JUDGE, "--out", str(tmp_path / "run"),
                   env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"})
    assert done.returncode == 0, done.stderr[-3000:]
    model_requests = [r for r in server.requests if r["model"] == "gpt-5"]
    assert len(model_requests) == 2 and all(r["service_tier"] == "flex" for r in model_requests)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    model, judge = summary["usage"]["model"], summary["usage"]["judge"]
    assert (model["calls"], model["batch_calls"], model["cached_tokens"], model["batch_cached_tokens"]) == (2, 2, 3200,
                                                                                                           3200)
    assert (judge["calls"], judge["batch_calls"], judge["cached_tokens"]) == (2, 0, 800)
    # USD per million tokens. gpt-5: input 1.25, cached input 0.125, output 10.00, flex = batch = half of each.
    #   2 calls x (400 x 1.25 + 1,600 x 0.125 + 100 x 10.00) = 2 x 1,700 = 3,400; x 0.5 = 1,700 -> $0.0017
    # o4-mini (list price): 2 x (600 x 1.10 + 400 x 0.275 + 50 x 4.40) = 2 x 990 = 1,980 -> $0.00198
    cost = summary["cost"]
    assert (cost["model"], cost["judge"], cost["total"]) == (0.0017, 0.00198, 0.00368)
    # Saved by the cache: gpt-5 3,200 x (1.25 - 0.125) x 0.5 = 1,800 -> $0.0018;
    # o4-mini 800 x (1.10 - 0.275) = 660 -> $0.00066; in all $0.00246.
    # Share of input from the cache: gpt-5 3,200 / 4,000, o4-mini 800 / 2,000, in all 4,000 / 6,000.
    cache = summary["prompt_cache"]
    assert (cache["model"]["share"], cache["model"]["saving"]) == (0.8, 0.0018)
    assert (cache["judge"]["share"], cache["judge"]["saving"]) == (0.4, 0.00066)
    assert (cache["share"], cache["saving"]) == (0.666667, 0.00246)
    report = (tmp_path / "run" / "report.html").read_text()
    assert "<caption>Provider&#x27;s prompt cache (saved in all: $0.0025)</caption>" in report
    assert "<tr><td>input from cache</td><td>80.0%</td><td>40.0%</td></tr>" in report
    assert "<tr><td>saved (USD)</td><td>$0.0018</td><td>$0.0007</td></tr>" in report
    compared = vtb("compare", str(tmp_path / "run"), "--json")
    assert compared.returncode == 0, compared.stderr
    (row,) = json.loads(compared.stdout)["runs"]
    assert (row["cache_share"], row["cache_saving"], row["cost"]) == (0.666667, 0.00246, 0.00368)
    shown = vtb("compare", str(tmp_path / "run"), env={"COLUMNS": "200"})
    assert re.search(r"66\.7%\s+│?\s*\$0\.0025", shown.stdout), shown.stdout
