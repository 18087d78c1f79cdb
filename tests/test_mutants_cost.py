"""Tokens and cost by hand at their boundaries (docs/concepts/run-directory.md, ``summary.json``'s
``usage`` and ``cost``): a side with no calls, a call without usage, a token whose price is unknown,
cache reads and writes, a judge error that carries usage, an episode that failed by infrastructure.
Part of ``make mutation`` (docs/development.md). Prices are the presets' (USD per million tokens):
gpt-4o input 2.5, cached 1.25, output 10, no cache-write price; claude-sonnet-4 input 3, cached
0.3, cache write 3.75, output 15; o4-mini input 1.1, cached 0.275, output 4.4; each with a batch
share of 0.5 (batch-billed tokens pay half the list price)."""

from __future__ import annotations

import pytest

from support.result_lines import result_line
from vtb_agents.analysis.cost import RunPrices, cost_of, cost_summary, run_usage, task_cost
from vtb_agents.models.presets import Prices, prices_for
from vtb_agents.results import TaskUsage, TokenUsage

SONNET = Prices(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0, batch=0.5)
GPT4O = Prices(input=2.5, cached_input=1.25, output=10.0, batch=0.5)
O4_MINI = Prices(input=1.1, cached_input=0.275, output=4.4, batch=0.5)
RUN = RunPrices(model=GPT4O, judge=O4_MINI)
"""A run of gpt-4o judged by o4-mini, as its run.json records their prices."""


def usage(calls: int = 1, inp: int = 0, out: int = 0, **more: int) -> TokenUsage:
    return TokenUsage(calls=calls, input_tokens=inp, output_tokens=out, total_tokens=inp + out, **more)


def test_the_presets_prices_are_the_ones_these_tests_compute_with():
    assert prices_for("claude-sonnet-4") == SONNET and prices_for("openai:gpt-4o") == GPT4O
    assert prices_for("o4-mini") == O4_MINI
    assert prices_for("no-such-model") is None


def test_cost_of_splits_input_into_uncached_cache_reads_and_cache_writes():
    # 1,000,000 input of which 200,000 read from and 100,000 written to the cache, 50,000 output:
    # 700,000 x 3 + 200,000 x 0.3 + 100,000 x 3.75 + 50,000 x 15 = 2.1 + 0.06 + 0.375 + 0.75 = 3.285 USD
    assert cost_of(usage(2, 1_000_000, 50_000, cached_tokens=200_000, cache_write_tokens=100_000), SONNET) == 3.285
    # gpt-4o: 600,000 x 2.5 + 400,000 x 1.25 + 100,000 x 10 = 1.5 + 0.5 + 1.0
    assert cost_of(usage(1, 1_000_000, 100_000, cached_tokens=400_000), GPT4O) == 3.0
    # 3 input tokens at 1.1 per million: 0.0000033, rounded to six places
    assert cost_of(usage(1, 3), Prices(input=1.1)) == 0.000003


def test_cost_of_is_unknown_for_a_token_without_a_price_and_zero_only_without_calls():
    assert cost_of(usage(1, 1000, 10, cache_write_tokens=1), GPT4O) is None  # a cache write gpt-4o has no price for
    assert cost_of(usage(1, 1000, 10), Prices(input=2.5)) is None  # output unpriced
    assert cost_of(usage(1, 1000, 0), Prices(input=2.5)) == 0.0025  # no output: its missing price costs nothing
    assert cost_of(usage(1, 1000, 10), None) is None  # a model without prices
    assert cost_of(usage(1, 1000, 10, calls_without_usage=1), GPT4O) is None  # one reply reported no usage
    assert cost_of(usage(0), None) == 0.0  # no call at all: known to cost nothing, prices or not
    assert cost_of(usage(1), None) is None  # one call of no tokens is still a call at unknown prices


def test_task_cost_adds_both_sides_and_is_unknown_for_a_failure_or_a_judge_error_that_carries_usage():
    paid = TaskUsage(model=usage(1, 40_000), judge=usage(1, 0, 20_000))  # 40,000 x 2.5 = 0.1; 20,000 x 10 = 0.2
    line = result_line("a", score=1.0, passed=True, usage=paid)
    assert task_cost(line, RunPrices(GPT4O, GPT4O)) == 0.3  # 0.1 + 0.2, not 0.30000000000000004
    assert task_cost(line, RunPrices(None, GPT4O)) is None and task_cost(line, RunPrices(GPT4O, None)) is None
    assert task_cost(result_line("b", score=1.0, passed=True), RunPrices(GPT4O, GPT4O)) is None  # no usage recorded
    assert task_cost(result_line("c", outcome="provider_error", usage=paid), RunPrices(GPT4O, GPT4O)) is None
    assert task_cost(result_line("d", outcome="judge_error", usage=paid), RunPrices(GPT4O, GPT4O)) is None


def test_run_usage_sums_each_side_and_counts_cache_hits_and_results_without_usage():
    lines = [result_line("none"),  # without usage (a result written before usage was kept), first
             result_line("a", usage=TaskUsage(model=usage(2, 100, 10), judge=usage(1, 5, 1),
                                              model_from_cache=usage(1, 50, 5), judge_from_cache=usage(1, 5, 1))),
             result_line("b", usage=TaskUsage(model=usage(1, 1, 1, reasoning_tokens=1))),
             result_line("c")]
    summed = run_usage(lines)
    assert summed["model"] == usage(3, 101, 11, reasoning_tokens=1).model_dump()
    assert summed["judge"] == usage(1, 5, 1).model_dump()
    assert summed["model_from_cache"] == usage(1, 50, 5).model_dump()
    assert summed["judge_from_cache"] == usage(1, 5, 1).model_dump()
    assert summed["tasks_without_usage"] == 2 and summed["cache_hits"] == 2


def test_cost_summary_bills_what_the_cache_did_not_answer_and_divides_by_passed_tasks():
    lines = [result_line("a", score=1.0, passed=True,
                         usage=TaskUsage(model=usage(3, 1_000_000, 100_000), model_from_cache=usage(1, 600_000, 60_000),
                                         judge=usage(2, 200_000, 0), judge_from_cache=usage(1, 100_000, 0))),
             result_line("b", score=0.0, passed=False, usage=TaskUsage(model=usage(1, 0, 0))),
             result_line("c", score=1.0, passed=True, usage=TaskUsage())]
    summary = cost_summary(lines, RUN)
    # model billed 400,000 x 2.5 + 40,000 x 10 = 1.4; judge billed 100,000 x 1.1 = 0.11; two passed tasks
    assert summary == {"currency": "USD", "model": 1.4, "judge": 0.11, "total": 1.51, "per_passed_task": 0.755,
                       "prices": {"model": {"input": 2.5, "cached_input": 1.25, "output": 10.0, "batch": 0.5},
                                  "judge": {"input": 1.1, "cached_input": 0.275, "output": 4.4, "batch": 0.5}}}
    third = cost_summary([*lines, result_line("d", score=1.0, passed=True, usage=TaskUsage())], RUN)
    assert third["per_passed_task"] == 0.503333  # 1.51 / 3, rounded to six places


def test_cost_summary_leaves_a_side_unknown_for_its_own_failures_only():
    paid = TaskUsage(model=usage(1, 400_000), judge=usage(1, 100_000))  # 1.0 and 0.11
    judge_failed = [result_line("a", score=1.0, passed=True, usage=paid),
                    result_line("b", outcome="judge_error", usage=paid)]
    assert cost_summary(judge_failed, RUN)[
        "model"] == 2.0  # both episodes ran and were billed; the judge's failed call reported nothing
    summary = cost_summary(judge_failed, RUN)
    assert (summary["judge"], summary["total"], summary["per_passed_task"]) == (None, None, None)
    model_failed = [result_line("a", score=0.0, passed=False, usage=paid),
                    result_line("b", outcome="provider_error", usage=TaskUsage(judge=usage(0)))]
    summary = cost_summary(model_failed, RUN)
    assert (summary["model"], summary["judge"], summary["total"]) == (None, 0.11, None)
    assert summary["per_passed_task"] is None  # unknown total (and nothing passed)
    missing = [result_line("a", score=1.0, passed=True, usage=paid), result_line("b", score=1.0, passed=True)]
    summary = cost_summary(missing, RUN)
    assert (summary["model"], summary["judge"]) == (None, None)  # a result without usage: neither side is known


def test_cost_summary_without_a_priced_model_or_a_passed_task():
    lines = [result_line("a", score=0.0, passed=False, usage=TaskUsage(model=usage(1, 10), judge=usage(1, 1_000_000)))]
    summary = cost_summary(lines, RunPrices(None, O4_MINI))
    assert (summary["model"], summary["judge"], summary["total"], summary["per_passed_task"]) == (None, 1.1, None, None)
    assert summary["prices"]["model"] is None
    free = cost_summary([result_line("a", score=0.0, passed=False, usage=TaskUsage())], RUN)
    assert (free["total"], free["per_passed_task"]) == (0.0, None)  # nothing passed: no cost per pass, not a division


def test_recorded_prices_are_run_jsons_and_an_unknown_price_name_is_refused():
    from vtb_agents.analysis.cost import recorded_prices
    from vtb_agents.config import RunConfig
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.rundir.records import ModelRecord, RunRecord

    def record(model: dict | None, judge: dict | None) -> RunRecord:
        return RunRecord(config=RunConfig(),
                         model=None if model is None else ModelRecord(spec="openai:m", prices=model),
                         judge=None if judge is None else ModelRecord(spec="openai:j", prices=judge))

    assert recorded_prices(record({"input": 2.5, "cached_input": 1.25, "output": 10.0, "batch": 0.5},
                                  {"input": 1.1, "cached_input": 0.275, "output": 4.4, "batch": 0.5})) == RUN
    assert recorded_prices(record({}, {"cache_write": 3.75})) == RunPrices(Prices(), Prices(cache_write=3.75))
    assert recorded_prices(record(None, None)) == RunPrices(None, None)  # no model or judge recorded
    unpriced = RunRecord(config=RunConfig(), model=ModelRecord(spec="replay", prices=None),
                         judge=ModelRecord(spec="rule", prices=None))
    assert recorded_prices(unpriced) == RunPrices(None, None)
    for side in ("model", "judge"):
        bad = record(*(({"input": 1.0, "per_call": 0.01}, {}) if side == "model" else ({}, {"per_call": 0.01})))
        with pytest.raises(RunError, match=rf"run\.json: {side}\.prices has unknown price name\(s\) per_call \(known: "
                                           r"input, cached_input, cache_write, output, batch\)"):
            recorded_prices(bad)
