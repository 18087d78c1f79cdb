"""Report parts for model settings, token usage and estimated cost (``run.json`` and ``summary.json``).

Unknown costs are shown as "unknown", never as $0: a price missing from the presets, or a call whose
provider reported no usage, makes the cost unknown (see :mod:`vtb_agents.analysis.cost`).
"""

from __future__ import annotations

import json
from typing import Any

from vtb_agents.report.markup import esc, table

TOKEN_FIELDS = ("calls", "calls_without_usage", "input_tokens", "cached_tokens", "cache_write_tokens",
                "output_tokens", "reasoning_tokens", "total_tokens")


def usd(value: float | None) -> str:
    """A cost in dollars, or 'unknown'."""
    return "unknown" if value is None else f"${value:,.4f}"


def model_settings_text(record: dict[str, Any] | None) -> str:
    """A resolved model of ``run.json`` in one line: spec, preset, settings."""
    if not record:
        return "-"
    preset = f" (preset {record['preset']})" if record.get("preset") else ""
    settings = json.dumps(record.get("settings") or {}, sort_keys=True)
    return f"{record.get('spec')}{preset} {settings}"


def settings_rows(run: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows for the report's settings table: the model's and the judge's resolved settings."""
    return [("model settings", model_settings_text(run.get("model"))),
            ("judge settings", model_settings_text(run.get("judge")))]


def usage_section(summary: dict[str, Any]) -> str:
    """Tokens of the model and of the judge, and the estimated cost of the run and per passed task."""
    usage, cost = summary.get("usage"), summary.get("cost")
    if not usage or not cost:
        return '<h2>Tokens and cost</h2><p class="note">This run recorded no token usage.</p>'
    rows = ([esc(name.replace("_", " ")), esc(usage["model"].get(name, 0)), esc(usage["judge"].get(name, 0))]
            for name in TOKEN_FIELDS)
    tokens = table(["", "model", "judge"], rows, caption="Tokens (as the providers reported them)")
    costs = table(["", "USD"], ([esc(k), esc(usd(cost.get(key)))] for k, key in (
        ("model", "model"), ("judge", "judge"), ("run", "total"), ("per passed task", "per_passed_task"))),
        caption="Estimated cost (presets' prices)")
    notes = []
    if usage.get("tasks_without_usage"):
        notes.append(f"{usage['tasks_without_usage']} result(s) were written without usage: costs are unknown.")
    if usage["model"].get("calls_without_usage") or usage["judge"].get("calls_without_usage"):
        notes.append("Some calls reported no usage (their tokens are unknown, not zero).")
    note = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return f'<h2>Tokens and cost</h2><div class="grid">{tokens}{costs}</div>{note}'
