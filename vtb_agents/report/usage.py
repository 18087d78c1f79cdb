"""Report parts for model settings, token usage and estimated cost (``run.json`` and ``summary.json``).

Unknown costs are shown as "unknown", never as $0: a price missing from the presets, or a call whose
provider reported no usage, makes the cost unknown (see :mod:`vtb_agents.analysis.cost`).
"""

from __future__ import annotations

import json

from vtb_agents.report.markup import esc, pct, table
from vtb_agents.rundir.records import ModelRecord, RunRecord, RunSummary

TOKEN_FIELDS = ("calls", "calls_without_usage", "input_tokens", "cached_tokens", "cache_write_tokens",
                "output_tokens", "reasoning_tokens", "total_tokens", "batch_calls")


def usd(value: float | None) -> str:
    """A cost in dollars, or 'unknown'."""
    return "unknown" if value is None else f"${value:,.4f}"


def model_settings_text(record: ModelRecord | None) -> str:
    """A resolved model of ``run.json`` in one line: spec, preset, settings."""
    if record is None:
        return "-"
    preset = f" (preset {record.preset})" if record.preset else ""
    return f"{record.spec}{preset} {json.dumps(record.settings, sort_keys=True)}"


def settings_rows(run: RunRecord) -> list[tuple[str, str]]:
    """Rows for the report's settings table: the model's and the judge's resolved settings."""
    return [("model settings", model_settings_text(run.model)), ("judge settings", model_settings_text(run.judge))]


def usage_section(summary: RunSummary) -> str:
    """Tokens of the model and of the judge, the estimated cost of the run and per passed task, and the
    share of the input the provider's prompt cache served with what it saved."""
    usage, cost = summary.usage, summary.cost
    rows = ([esc(name.replace("_", " ")), esc(getattr(usage.model, name)), esc(getattr(usage.judge, name))]
            for name in TOKEN_FIELDS)
    tokens = table(["", "model", "judge"], rows, caption="Tokens (as the providers reported them)")
    costs = table(["", "USD"], ([esc(k), esc(usd(value))] for k, value in (
        ("model", cost.model), ("judge", cost.judge), ("run", cost.total), ("per passed task", cost.per_passed_task))),
        caption="Estimated cost (presets' prices)")
    cache = summary.prompt_cache
    cached = table(["", "model", "judge"], [
        ["input from cache", esc(pct(cache.model.share)), esc(pct(cache.judge.share))],
        ["saved (USD)", esc(usd(cache.model.saving)), esc(usd(cache.judge.saving))],
    ], caption=f"Provider's prompt cache (saved in all: {usd(cache.saving)})")
    notes = []
    if usage.tasks_without_usage:
        notes.append(f"{usage.tasks_without_usage} result(s) were written without usage: costs are unknown.")
    if usage.model.calls_without_usage or usage.judge.calls_without_usage:
        notes.append("Some calls reported no usage (their tokens are unknown, not zero).")
    note = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return f'<h2 id="cost">Tokens and cost</h2><div class="grid">{tokens}{costs}{cached}</div>{note}'
