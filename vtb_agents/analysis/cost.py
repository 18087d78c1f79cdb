"""Tokens and estimated cost of a run: the ``usage`` and ``cost`` fields of ``summary.json``.

Tokens are summed from the per-task usage the runner recorded (model and judge apart); the cost
multiplies them by the prices the run recorded (:class:`RunPrices`, USD per million tokens): the
presets' prices as the run plan looked them up at the run's start, which ``run.json`` keeps
(:func:`recorded_prices`), so that a run is priced the same whichever vtb reads it later. A price
that is not known, a call whose provider reported no usage, or a result without usage makes the cost unknown (None),
never zero; so does an infrastructure failure (a failed request reports no usage, billed or not):
of the model's side an episode that failed, of the judge's a judge error. Only a side that made
no calls at all, with nothing failed, costs a known 0.

Calls the model cache answered (``--model-cache``) count in the tokens as the provider reported
them when they were made, and in ``cache_hits``; they cost nothing, so a run replayed from its
cache has the tokens of the original run and a cost of 0.

Per call, as the provider billed it (docs/how-to/cost-and-rate-limits.md): input tokens read from
the provider's prompt cache at ``cached_input``, tokens written to it at ``cache_write``, the other
input tokens at ``input``, output (reasoning included) at ``output``; tokens billed at the batch
rate (``TokenUsage.batch_*``: a batch API, or OpenAI's ``service_tier="flex"``) at those prices
times the preset's ``batch`` share. ``prompt_cache`` of ``summary.json`` gives the share of the
input the provider's cache served and what that saved: cached tokens x (``input`` - ``cached_input``),
times ``batch`` for batch-billed ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterable

from vtb_agents.models.presets import Prices
from vtb_agents.results import TaskResult, TokenUsage, is_infrastructure
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.records import ModelRecord, RunRecord

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class RunPrices:
    """The prices a run's tokens cost: its model's and its judge's (None: unknown), as the run recorded
    them (:func:`recorded_prices`)."""

    model: Prices | None = None
    judge: Prices | None = None


def _recorded(record: ModelRecord | None, role: str) -> Prices | None:
    """The prices ``record`` (``run.json``'s ``role``) carries; a price name this vtb does not know
    raises RunError naming it."""
    if record is None or record.prices is None:
        return None
    unknown = sorted(set(record.prices) - {f.name for f in fields(Prices)})
    if unknown:
        raise RunError(f"run.json: {role}.prices has unknown price name(s) {', '.join(unknown)} (known: "
                       f"{', '.join(f.name for f in fields(Prices))})")
    return Prices(**record.prices)


def recorded_prices(record: RunRecord) -> RunPrices:
    """The prices ``run.json`` records of the run's model and judge (the plan's, at the run's start;
    a regrade's judge, at the regrade's)."""
    return RunPrices(model=_recorded(record.model, "model"), judge=_recorded(record.judge, "judge"))


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


def _known_sides(results: list[TaskResult]) -> dict[str, bool]:
    """Whether the usage of each side is fully known: every result has usage, and no episode (model)
    or judge call (judge) failed by infrastructure (a failed request reports no usage, billed or not)."""
    complete = all(r.usage is not None for r in results)
    return {"model": complete and not any(is_infrastructure(r.episode.ended) for r in results),
            "judge": complete and not any(r.ended == "judge_error" for r in results)}


def run_usage(results: Iterable[TaskResult]) -> dict[str, Any]:
    """Tokens of the model and of the judge summed over ``results``, how many results had none, and
    how many calls the model cache answered (``cache_hits``; of the model's and the judge's calls apart:
    ``model_from_cache``, ``judge_from_cache``, their tokens as reported when the calls were made); the
    part billed at the batch price is in each usage's ``batch_*`` counts."""
    sums, missing = _sums(results)
    return {"model": sums["model"].model_dump(), "judge": sums["judge"].model_dump(), "tasks_without_usage": missing,
            "cache_hits": sums["model_from_cache"].calls + sums["judge_from_cache"].calls,
            "model_from_cache": sums["model_from_cache"].model_dump(),
            "judge_from_cache": sums["judge_from_cache"].model_dump()}


def batch_part(usage: TokenUsage) -> TokenUsage:
    """The part of ``usage`` billed at the batch rate, as a usage of its own (no ``batch_*`` counts)."""
    return TokenUsage(calls=usage.batch_calls, input_tokens=usage.batch_input_tokens,
                      cached_tokens=usage.batch_cached_tokens, cache_write_tokens=usage.batch_cache_write_tokens,
                      output_tokens=usage.batch_output_tokens,
                      total_tokens=usage.batch_input_tokens + usage.batch_output_tokens)


def _tiers(usage: TokenUsage, prices: Prices) -> list[tuple[TokenUsage, float | None]]:
    """``usage`` split by billing rate: the list-price part (share 1) and the batch part (the preset's share)."""
    batch = batch_part(usage)
    return [(usage - batch, 1.0), (batch, prices.batch)]


def _list_cost(usage: TokenUsage, prices: Prices) -> float | None:
    """USD for ``usage`` at the list ``prices`` (unrounded), or None when a used token has no known price."""
    uncached = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    parts = [(uncached, prices.input), (usage.cached_tokens, prices.cached_input),
             (usage.cache_write_tokens, prices.cache_write), (usage.output_tokens, prices.output)]
    if any(tokens and price is None for tokens, price in parts):
        return None
    return sum(tokens * price for tokens, price in parts if price is not None) / PER_TOKENS


def cost_of(usage: TokenUsage, prices: Prices | None) -> float | None:
    """USD for ``usage`` at ``prices``, or None when any token that was used has no known price
    (a batch-billed call included: its price is the list price times ``prices.batch``)."""
    if usage.calls == 0:
        return 0.0
    if prices is None or usage.calls_without_usage:
        return None
    total = 0.0
    for part, share in _tiers(usage, prices):
        if part.calls == 0 and part.input_tokens == part.output_tokens == 0:
            continue
        cost = _list_cost(part, prices)
        if cost is None or share is None:
            return None
        total += cost * share
    return round(total, 6)


def cache_saving(usage: TokenUsage, prices: Prices | None) -> float | None:
    """USD the provider's prompt cache saved on ``usage``: each cached input token at ``input`` minus
    ``cached_input`` (times ``prices.batch`` for batch-billed ones); 0 without cached tokens, None when
    a price it needs is unknown or a call reported no usage."""
    if usage.cached_tokens == 0 and not usage.calls_without_usage:
        return 0.0
    if prices is None or usage.calls_without_usage or prices.input is None or prices.cached_input is None:
        return None
    saving = 0.0
    for part, share in _tiers(usage, prices):
        if part.cached_tokens and share is None:
            return None
        saving += part.cached_tokens * (prices.input - prices.cached_input) * (share or 0.0)
    return round(saving / PER_TOKENS, 6)


def cache_share(usage: TokenUsage) -> float | None:
    """The share of ``usage``'s input tokens the provider's prompt cache served (0..1); None when no
    input was reported or a call reported no usage."""
    if usage.calls_without_usage or usage.input_tokens == 0:
        return None
    return round(usage.cached_tokens / usage.input_tokens, 6)


def prompt_cache_summary(results: list[TaskResult], prices: RunPrices) -> dict[str, Any]:
    """``prompt_cache`` of ``summary.json``: per side (the calls made in this run, not those the model
    cache answered) the input and cached tokens, the cached share and the USD saved; ``share`` and
    ``saving`` of both sides together (None where unknown, as the cost is: :func:`cost_summary`)."""
    sums, _ = _sums(results)
    known = _known_sides(results)
    sides: dict[str, Any] = {}
    billed = {side: sums[side] - sums[f"{side}_from_cache"] for side in ("model", "judge")}
    for side, side_prices in (("model", prices.model), ("judge", prices.judge)):
        sides[side] = {"input_tokens": billed[side].input_tokens, "cached_tokens": billed[side].cached_tokens,
                       "cache_write_tokens": billed[side].cache_write_tokens,
                       "share": cache_share(billed[side]) if known[side] else None,
                       "saving": cache_saving(billed[side], side_prices) if known[side] else None}
    savings = [sides[side]["saving"] for side in ("model", "judge")]
    both = billed["model"] + billed["judge"]
    share = cache_share(both) if all(known.values()) else None
    return {**sides, "share": share, "saving": None if None in savings else round(sum(savings), 6)}


def task_cost(result: TaskResult, prices: RunPrices) -> float | None:
    """USD one task cost (its model's and its judge's tokens at the run's ``prices``),
    by the rules of :func:`cost_summary`: None when the result has no usage, a price is unknown, or a
    side failed by infrastructure."""
    if result.usage is None or is_infrastructure(result.episode.ended) or result.ended == "judge_error":
        return None
    model = cost_of(result.usage.model, prices.model)
    judged = cost_of(result.usage.judge, prices.judge)
    return None if model is None or judged is None else round(model + judged, 6)


def cost_summary(results: list[TaskResult], prices: RunPrices) -> dict[str, Any]:
    """Estimated cost of the model, the judge, the run and per passed task at the run's ``prices``
    (None where unknown), and the prices it used."""
    sums, _ = _sums(results)
    known = _known_sides(results)
    model_known, judge_known = known["model"], known["judge"]
    model_prices, judge_prices = prices.model, prices.judge
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
