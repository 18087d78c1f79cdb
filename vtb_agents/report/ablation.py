"""The ablation page: the runs of ``vtb ablate`` side by side, with APR and ARS per setting."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from vtb_agents.report.compare import Comparison, compare_runs
from vtb_agents.report.markup import esc, page
from vtb_agents.report.plots import bar_svg

ABLATION_FILE = "ablation.html"


def write_ablation_report(out: Path, settings: Sequence[str], descriptions: dict[str, str]) -> tuple[Path, Comparison]:
    """Write ``out/ablation.html`` for the runs ``out/<setting>`` and return it with the comparison."""
    comparison = compare_runs([Path(out) / setting for setting in settings])
    labels = list(settings)
    plots = [bar_svg(labels, [row.apr or 0.0 for row in comparison.rows], title="APR by setting",
                     ylabel="APR (%)", percent=True),
             bar_svg(labels, [row.ars or 0.0 for row in comparison.rows], title="ARS by setting",
                     ylabel="ARS (%)", percent=True)]
    items = "".join(f"<li><b>{esc(s)}</b>: {esc(descriptions.get(s, ''))}</li>" for s in settings)
    body = (f"<h1>Ablations</h1><p class=\"sub\">{esc(comparison.rows[0].model)} on "
            f"{comparison.rows[0].tasks} task(s)</p><ul>{items}</ul>{comparison.to_html()}"
            f"<div class=\"grid\">{''.join(f'<div class=plot>{svg}</div>' for svg in plots)}</div>")
    path = Path(out) / ABLATION_FILE
    path.write_text(page("Ablations", body), encoding="utf-8")
    return path, comparison
