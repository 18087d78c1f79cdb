"""Tokens and estimated cost of a run: the ``usage`` and ``cost`` fields of ``summary.json``.

Tokens are summed from the per-task usage the runner recorded (model and judge apart); the cost
multiplies them by the presets' prices (USD per million tokens). A price that is not known, a
call whose provider reported no usage, or a result without usage makes the cost unknown (None),
never zero; so does an infrastructure failure (a failed request reports no usage, billed or not):
of the model's side an episode that failed, of the judge's a judge error. Only a side that made
no calls at all, with nothing failed, costs a known 0.

Calls the model cache answered (``--model-cache``) count in the tokens as the provider reported
them when they were made, and in ``cache_hits``; they cost nothing, so a run replayed from its
cache has the tokens of the original run and a cost of 0.
"""

from __future__ import annotations

from typing import Any, Iterable

from vtb_agents.models.presets import Prices, prices_for
from vtb_agents.results import TaskResult, TokenUsage, is_infrastructure

PER_TOKENS = 1_000_000


def _sums(results: Iterable[TaskResult]) -> tuple[dict[str, TokenUsage], int]:
    """Model and judge usage over ``results``, in all and answered by the model cache; results without usage."""
    sums = {side: TokenUsage() for side in ("model", "judge", "model_from_cache", "judge_from_cache")}
    missing = 0
    for result in results:
        if result.usage is None:
            missing += 1
            continue
        for side in sums:
            sums[side] = sums[side] + getattr(result.usage, side)
    return sums, missing


def run_usage(results: Iterable[TaskResult]) -> dict[str, Any]:
    """Tokens of the model and of the judge summed over ``results``, how many results had none, and
    how many calls the model cache answered (``cache_hits``; of the model's and the judge's calls apart:
    ``model_from_cache``, ``judge_from_cache``, their tokens as reported when the calls were made)."""
    sums, missing = _sums(results)
    return {"model": sums["model"].model_dump(), "judge": sums["judge"].model_dump(), "tasks_without_usage": missing,
            "cache_hits": sums["model_from_cache"].calls + sums["judge_from_cache"].calls,
            "model_from_cache": sums["model_from_cache"].model_dump(),
            "judge_from_cache": sums["judge_from_cache"].model_dump()}


def cost_of(usage: TokenUsage, prices: Prices | None) -> float | None:
    """USD for ``usage`` at ``prices``, or None when any token that was used has no known price."""
    if usage.calls == 0:
        return 0.0
    if prices is None or usage.calls_without_usage:
        return None
    uncached = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    parts = [(uncached, prices.input), (usage.cached_tokens, prices.cached_input),
             (usage.cache_write_tokens, prices.cache_write), (usage.output_tokens, prices.output)]
    if any(tokens and price is None for tokens, price in parts):
        return None
    return round(sum(tokens * price for tokens, price in parts if price is not None) / PER_TOKENS, 6)


def task_cost(result: TaskResult, model_prices: Prices | None, judge_prices: Prices | None) -> float | None:
    """USD one task cost (its model's and its judge's tokens at these prices, see :func:`prices_for`),
    by the rules of :func:`cost_summary`: None when the result has no usage, a price is unknown, or a
    side failed by infrastructure."""
    if result.usage is None or is_infrastructure(result.episode.ended) or result.ended == "judge_error":
        return None
    model = cost_of(result.usage.model, model_prices)
    judged = cost_of(result.usage.judge, judge_prices)
    return None if model is None or judged is None else round(model + judged, 6)


def cost_summary(results: list[TaskResult], *, model: str | None, judge: str) -> dict[str, Any]:
    """Estimated cost of the model, the judge, the run and per passed task (None where unknown)."""
    sums, missing = _sums(results)
    complete = missing == 0
    model_known = complete and not any(is_infrastructure(r.episode.ended) for r in results)
    judge_known = complete and not any(r.ended == "judge_error" for r in results)
    model_prices, judge_prices = prices_for(model) if model else None, prices_for(judge)
    billed = {side: sums[side] - sums[f"{side}_from_cache"] for side in ("model", "judge")}
    model_cost = cost_of(billed["model"], model_prices) if model_known else None
    judge_cost = cost_of(billed["judge"], judge_prices) if judge_known else None
    total = None if model_cost is None or judge_cost is None else round(model_cost + judge_cost, 6)
    passed = sum(bool(r.grade.passed) for r in results)
    return {
        "currency": "USD", "model": model_cost, "judge": judge_cost, "total": total,
        "per_passed_task": round(total / passed, 6) if total is not None and passed else None,
        "prices": {"model": model_prices.known() if model_prices else None,
                   "judge": judge_prices.known() if judge_prices else None},
    }
