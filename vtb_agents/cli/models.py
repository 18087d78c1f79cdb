"""``vtb models``: the model presets (``vtb_agents/models/presets.toml``) with their settings."""

from __future__ import annotations

import json
from typing import Any

import typer

from vtb_agents.cli.common import cli_app, out

models_cli = cli_app()


def price_text(prices: dict[str, float]) -> str:
    """Known prices in USD per million tokens (a share of them, such as ``batch``, as ``x0.5``), or 'unknown'."""
    from vtb_agents.models.presets import FACTOR_KEYS

    return ", ".join(f"{k} x{v:g}" if k in FACTOR_KEYS else f"{k} ${v:g}" for k, v in prices.items()) or "unknown"


def settings_text(settings: dict[str, Any]) -> str:
    """Settings as compact ``key=value`` pairs (values in JSON)."""
    return " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in settings.items()) or "-"


def preset_row(name: str) -> dict[str, Any]:
    """The listing of one preset: name, spec, settings, vision, prices, note."""
    from vtb_agents.models.presets import presets

    preset = presets()[name]
    return {"name": preset.name, "spec": preset.spec, "settings": preset.settings, "vision": preset.vision,
            "prices_per_mtok": preset.prices.known(), "note": preset.note}


@models_cli.command("models")
def models(as_json: bool = typer.Option(False, "--json", help="One JSON object per line.")) -> None:
    """List the model presets: `--model NAME` (or `--judge NAME`) runs a model with these settings."""
    from rich.table import Table

    from vtb_agents.models.presets import presets

    rows = [preset_row(name) for name in presets()]
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    table = Table("name", "spec", "settings", "vision", "USD / 1M tokens", title="model presets (--model NAME)")
    for row in rows:
        table.add_row(row["name"], row["spec"], settings_text(row["settings"]), "yes" if row["vision"] else "no",
                      price_text(row["prices_per_mtok"]))
    out.print(table)
    out.print("--model-kwargs JSON adds or overrides settings, e.g. '{\"reasoning_effort\": \"low\"}'.")
