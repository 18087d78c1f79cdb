"""The numbers the docs and the paper give, written out as literals: run defaults, the retry
backoff, the sandbox's limits and the presets' list prices. (test_cli_startup.py checks that the
options and RunConfig share one definition; this checks that definition says what is documented.)"""

from __future__ import annotations

import pytest
import typer.main
from langchain_openai import ChatOpenAI

from vtb_agents.analysis.cost import cache_saving, cache_share, cost_of
from vtb_agents.cli import app
from vtb_agents.judges.llm import LLMJudge
from vtb_agents.models.presets import Prices, presets
from vtb_agents.models.usage import billed_at_batch
from vtb_agents.models.retry import model_retry_policy
from vtb_agents.results import TokenUsage
from vtb_agents.config import RunConfig
from vtb_agents.sandbox import Limits

GiB = 1024 ** 3


def test_run_and_grade_defaults_are_the_documented_ones():
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    run = commands["run"].make_context("run", []).params
    # docs/reference/configuration.md: --max-tool-rounds 20 (the paper's cap), --max-image-side 2048;
    # "Outcomes": --request-timeout 120 on `vtb run` and `vtb grade`
    assert (run["max_tool_rounds"], run["max_image_side"], run["request_timeout_s"]) == (20, 2048, 120)
    assert (run["judge"], run["critical_rule"], run["prompt_level"], run["history"]) == ("rule", "weight", "high",
                                                                                       "golden")
    grade = commands["grade"].make_context("grade", ["runs/x"]).params
    assert grade["request_timeout"] == 120
    config = RunConfig()
    assert (config.episode.max_tool_rounds, config.episode.max_image_side, config.request_timeout_s) == (20, 2048, 120)


def test_model_and_judge_calls_back_off_from_1_s_doubling_to_at_most_30_s():
    policy = model_retry_policy()  # docs/concepts/outcomes.md: 1 s doubling to at most 30 s, with jitter
    assert (policy.initial_interval, policy.backoff_factor, policy.max_interval, policy.jitter) == (1, 2, 30, True)
    assert policy.max_attempts == 4
    judge = LLMJudge(ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1"), "openai:m")
    assert judge.attempts == 3
    wait = judge._runnable._kwargs_retrying["wait"]  # the tenacity wait the judge's retries use
    assert (wait.multiplier, wait.exp_base, wait.max, wait.jitter) == (1, 2, 30, 1)


def test_sandbox_limits_are_the_documented_ones():
    limits = Limits()  # docs/concepts/sandbox.md: memory cap 4 GiB, working-directory quota 2 GiB
    assert (limits.memory_bytes, limits.workdir_bytes) == (4 * GiB, 2 * GiB)
    assert limits.address_space_bytes == 4 * GiB


PRICES = {  # USD per million tokens: input, cached input, cache write, output (providers' list prices);
    # then the share of them paid at the batch rate (OpenAI Batch API and flex, Anthropic Message Batches,
    # Gemini Batch Mode: 50%)
    "gpt-5": (1.25, 0.125, None, 10.0, 0.5),
    "gpt-5-think": (1.25, 0.125, None, 10.0, 0.5),
    "o3": (2.0, 0.5, None, 8.0, 0.5),
    "o4-mini": (1.1, 0.275, None, 4.4, 0.5),
    "gpt-4.1": (2.0, 0.5, None, 8.0, 0.5),
    "gpt-4o": (2.5, 1.25, None, 10.0, 0.5),
    "claude-opus-4.1": (15.0, 1.5, 18.75, 75.0, 0.5),
    "claude-sonnet-4": (3.0, 0.3, 3.75, 15.0, 0.5),
    "claude-sonnet-4.5": (3.0, 0.3, 3.75, 15.0, 0.5),
    "gemini-2.5-pro": (1.25, None, None, 10.0, 0.5),
    "gemini-2.5-flash": (0.3, None, None, 2.5, 0.5),
    "llama-4-maverick": (None, None, None, None, None),  # open models: no list price, cost unknown
    "llama-4-scout": (None, None, None, None, None),
}


@pytest.mark.parametrize("name, prices", sorted(PRICES.items()))
def test_preset_prices(name, prices):
    got = presets()[name].prices
    assert (got.input, got.cached_input, got.cache_write, got.output, got.batch) == prices


def test_cost_at_preset_prices_by_hand():
    usage = TokenUsage(calls=4, input_tokens=1_000_000, cached_tokens=200_000, cache_write_tokens=100_000,
                       output_tokens=50_000)
    # claude-sonnet-4: 700,000 uncached x 3.00 + 200,000 cached x 0.30 + 100,000 written x 3.75 + 50,000 out x 15.00
    #                = 2.1 + 0.06 + 0.375 + 0.75 = 3.285 USD
    assert cost_of(usage, presets()["claude-sonnet-4"].prices) == 3.285
    # gpt-4o has no cache-write price: tokens written to a cache make the cost unknown, not free
    assert cost_of(usage, presets()["gpt-4o"].prices) is None
    plain = TokenUsage(calls=1, input_tokens=1_000_000, cached_tokens=200_000, output_tokens=50_000)
    assert cost_of(plain, presets()["gpt-4o"].prices) == 2.75  # 800k x 2.50 + 200k x 1.25 + 50k x 10.00 = 2+0.25+0.5
    assert cost_of(TokenUsage(), presets()["gpt-4o"].prices) == 0.0  # no call: a known zero


def test_cost_of_batch_verdicts_and_cached_input_by_hand():
    """docs/how-to/cost-and-rate-limits.md: batch-billed tokens cost the preset's ``batch`` share of
    each list price, cached ones included; the prompt cache's saving is cached x (input - cached input)."""
    live = TokenUsage(calls=3, input_tokens=300_000, cached_tokens=100_000, output_tokens=30_000)
    batch = billed_at_batch(TokenUsage(calls=5, input_tokens=500_000, cached_tokens=200_000, output_tokens=50_000))
    usage = live + batch
    assert (usage.calls, usage.batch_calls, usage.cached_tokens, usage.batch_cached_tokens) == (8, 5, 300_000, 200_000)
    o4_mini = presets()["o4-mini"].prices  # 1.10 input, 0.275 cached input, 4.40 output, batch 0.5
    # live:  200,000 x 1.10 + 100,000 x 0.275 + 30,000 x 4.40 = 220,000 + 27,500 + 132,000 = 379,500
    # batch: (300,000 x 1.10 + 200,000 x 0.275 + 50,000 x 4.40) x 0.5 = (330,000 + 55,000 + 220,000) x 0.5 = 302,500
    assert cost_of(usage, o4_mini) == 0.682  # (379,500 + 302,500) / 1,000,000
    # saving: live 100,000 x 0.825 = 82,500; batch 200,000 x 0.825 x 0.5 = 82,500 -> 0.165 USD
    assert cache_saving(usage, o4_mini) == 0.165
    assert cache_share(usage) == 0.375  # 300,000 of 800,000 input tokens
    # a preset without a batch share prices batch tokens as unknown, never at list price
    assert cost_of(usage, Prices(input=1.1, cached_input=0.275, output=4.4)) is None
    assert cost_of(live, Prices(input=1.1, cached_input=0.275, output=4.4)) == 0.3795
