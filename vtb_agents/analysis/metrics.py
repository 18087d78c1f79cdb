"""APR / ARS with breakdowns, tool-use metrics and judge counts: the fields of ``summary.json``.

Definitions follow the paper (arXiv 2510.12712; docs/concepts/metrics.md): APR and ARS are means over
every task of the run (a task the model left unanswered fails its rubrics), except the ones an
infrastructure failure left ungraded, which are listed until retried; with epochs, a task's epochs
are averaged first, and every score has its clustered standard error and 95% interval
(:mod:`vtb_agents.analysis.uncertainty`); a tool call succeeds when it
returns a non-empty result without error; image operations are counted per operation.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from statistics import fmean
from typing import Any, Callable, Iterable

from vtb_agents.analysis.cost import RunPrices, cost_summary, prompt_cache_summary, run_usage
from vtb_agents.analysis.image_ops import count_image_ops
from vtb_agents.analysis.regions import region_iou
from vtb_agents.analysis.uncertainty import apr_estimate, ars_estimate, by_task, pass_at_k
from vtb_agents.results import is_pending
from vtb_agents.results import TaskResult, ToolCallRecord
from vtb_agents.tasks.model import CRITICAL_WEIGHT
from vtb_agents.tool_names import VISION_TOOL_NAME

VISION_TOOL = VISION_TOOL_NAME
_STATUS_KEYS = frozenset({"ok", "note", "note_images", "truncated", "expression", "query", "url",
                          "requested_url", "location", "date", "units", "source"})
"""Keys of a JSON tool result that echo the call or describe it, rather than being its result."""


def _rate(values: list[float]) -> float | None:
    return round(fmean(values), 6) if values else None


def score_block(results: list[TaskResult], epochs: int) -> dict[str, Any]:
    """``{n, graded, apr, ars}`` over ``results`` (one per task and epoch) with the standard errors and
    95% intervals of APR and ARS, and with ``epochs`` > 1 ``pass_at_k`` and ``pass_hat_k``
    (:mod:`~vtb_agents.analysis.uncertainty`). ``n`` counts tasks, ``graded`` those with a graded
    epoch; APR and ARS count graded epochs only."""
    tasks = by_task(results)
    apr, ars = apr_estimate(tasks), ars_estimate(tasks)
    block: dict[str, Any] = {
        "n": len(tasks),
        "graded": sum(bool(t.passes) for t in tasks),
        "apr": apr.mean,
        "ars": ars.mean,
        "apr_stderr": apr.stderr,
        "apr_ci95": list(apr.ci95) if apr.ci95 else None,
        "ars_stderr": ars.stderr,
        "ars_ci95": list(ars.ci95) if ars.ci95 else None,
    }
    if epochs > 1:
        block["pass_at_k"], block["pass_hat_k"] = pass_at_k(tasks, epochs)
    return block


def breakdown(results: list[TaskResult], key: Callable[[TaskResult], str],
              epochs: int) -> dict[str, dict[str, Any]]:
    """:func:`score_block` per group, groups sorted by name."""
    groups: dict[str, list[TaskResult]] = defaultdict(list)
    for result in results:
        groups[key(result)].append(result)
    return {name: score_block(groups[name], epochs) for name in sorted(groups)}


def _non_empty(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_non_empty(v) for k, v in value.items() if k not in _STATUS_KEYS)
    if isinstance(value, (list, str)):
        return bool(value if isinstance(value, list) else value.strip())
    return value is not None


def call_succeeded(call: ToolCallRecord) -> bool:
    """The paper's success: the call returned a non-empty result without error.

    A code call's result is what it printed or saved; a JSON result counts when some field other
    than its status or the echoed arguments holds something (``{"results": []}`` is empty).
    """
    if not call.ok:
        return False
    if call.images:
        return True
    try:
        payload = json.loads(call.output)
    except ValueError:
        return bool(call.output.strip())
    return _non_empty(payload) and not (isinstance(payload, dict) and payload.get("error"))


def tool_metrics(results: list[TaskResult]) -> dict[str, Any]:
    """The paper's tool-use metrics: proactivity, success rate, volume, calls per tool, image ops;
    and, apart from them, the images the strategy's own steps made (``strategy_image_ops``: zoom
    crops, marked images), which are not tool calls and change none of the paper's metrics."""
    calls = [call for r in results for call in r.episode.tool_calls]
    by_tool = Counter(call.name for call in calls)
    vision_code = [str(c.args.get("code", "")) for c in calls if c.name == VISION_TOOL]
    return {
        "proactivity": _rate([1.0 if r.episode.tool_calls else 0.0 for r in results]),
        "success_rate": _rate([1.0 if call_succeeded(c) else 0.0 for c in calls]),
        "volume": _rate([float(len(r.episode.tool_calls)) for r in results]),
        "calls": len(calls),
        "by_tool": dict(sorted(by_tool.items())),
        "image_ops": count_image_ops(vision_code),
        "strategy_image_ops": dict(sorted(sum((Counter(r.episode.strategy_image_ops) for r in results),
                                              Counter()).items())),
    }


def judge_counts(results: Iterable[TaskResult], judge_name: str) -> dict[str, Any]:
    """How rubrics were decided: judge calls, deterministic checks, unjudged, errors, cache hits, and
    verdicts pending in a batch (``pending``: non-zero only while a ``vtb run --judge-batch`` waits for
    its batches; they are not errors)."""
    verdicts = [v for r in results for v in r.grade.verdicts]
    pending = sum(is_pending(v) for v in verdicts)
    return {
        "model": judge_name,
        "calls": sum(v.model_call for v in verdicts),
        "checks": sum(v.judge == "check" for v in verdicts),
        "unjudged": sum(v.status == "unjudged" for v in verdicts),
        "errors": sum(v.status == "error" and v.judge != "episode" for v in verdicts) - pending,
        "cache_hits": sum(v.cached for v in verdicts),
        "pending": pending,  # verdicts a --judge-batch run still waits for (0 once graded)
    }


def summarize(results: list[TaskResult], *, judge_name: str, prices: RunPrices, expected: int | None = None,
              epochs: int = 1, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole ``summary.json`` (DESIGN.md "Run directory"), with token ``usage`` and estimated
    ``cost`` at the run's recorded ``prices`` (:func:`~vtb_agents.analysis.cost.recorded_prices`).

    ``results`` hold one line per task and epoch (``epochs`` per task). ``tasks`` counts tasks,
    ``graded`` those with a graded epoch; ``complete`` is False while episodes of the ``expected``
    tasks are missing (an interrupted run: ``missing`` counts them) or any is ungraded by an
    infrastructure failure (``infrastructure_errors``: how many episodes, which tasks);
    ``outcomes`` counts how episodes ended (docs/concepts/outcomes.md).
    """
    overall = score_block(results, epochs)
    failed = [r for r in results if r.infrastructure_failed]
    missing = max(0, expected * epochs - len(results)) if expected is not None else 0
    return {
        "tasks": overall["n"],
        "graded": overall["graded"],
        "ungraded": overall["n"] - overall["graded"],
        "epochs": epochs,
        "apr": overall["apr"],
        "ars": overall["ars"],
        **{key: value for key, value in overall.items() if key != "n"},  # graded, apr, ars: set above
        "complete": not failed and not missing,
        "missing": missing,
        "infrastructure_errors": {"count": len(failed), "task_ids": sorted({r.task_id for r in failed})},
        "outcomes": dict(sorted(Counter(r.ended for r in results).items())),
        "by_category": breakdown(results, lambda r: r.category, epochs),
        "by_domain": breakdown(results, lambda r: r.domain, epochs),
        "by_turncase": breakdown(results, lambda r: r.turncase, epochs),
        "tool_metrics": tool_metrics(results),
        "region_iou": region_iou(results),
        "judge": judge_counts(results, judge_name),
        "critical_disagreements": sum(
            (v.weight >= CRITICAL_WEIGHT) != v.critical_flag for r in results for v in r.grade.verdicts),
        "episodes": {
            "errors": sum(r.episode.status == "error" for r in results),
            "task_timeout": sum(r.episode.ended == "task_timeout" for r in results),
            "context_exceeded": sum(r.episode.ended == "context_exceeded" for r in results),
            "tool_round_cap": sum(t.status == "tool_round_cap" for r in results for t in r.episode.turns),
        },
        "usage": run_usage(results),
        "cost": cost_summary(results, prices),
        "prompt_cache": prompt_cache_summary(results, prices),
        **(extra or {}),
    }
