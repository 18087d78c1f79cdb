"""A run's results in a notebook: the HTML ``Evaluation._repr_html_`` shows (Jupyter renders it under the
cell) and the one-screen text of its ``__repr__``.

The HTML is a fragment (no page, no script, styles inline) built from the report's own tables: APR and ARS
with their 95% intervals overall and per category (pass@k and pass^k with epochs), the region figures of
"Looked at the right place", and a link to the run's ``report.html``.
"""

from __future__ import annotations

from pathlib import Path

from vtb_agents.report.html import overall_score, score_table
from vtb_agents.report.markup import esc, interval, pct
from vtb_agents.report.regions_html import region_table
from vtb_agents.rundir.records import RunSummary

STYLE = ("<style>.vtb-eval table{border-collapse:collapse;margin:4px 12px 8px 0;display:inline-table;"
         "vertical-align:top}.vtb-eval td,.vtb-eval th{padding:2px 8px;border-bottom:1px solid #ddd;"
         "text-align:right}.vtb-eval td:first-child,.vtb-eval th:first-child{text-align:left}"
         ".vtb-eval caption{font-weight:600;text-align:left}</style>")


def title_text(summary: RunSummary) -> str:
    """What was run: model, judge, tasks, graded, epochs."""
    epochs = f", {summary.epochs} epochs per task" if summary.epochs > 1 else ""
    return (f"{summary.model or '?'} (judge {summary.judge.model or '?'}): {summary.tasks} task(s), "
            f"{summary.graded} graded{epochs}")


def evaluation_html(summary: RunSummary, report: Path) -> str:
    """The notebook view of a run: title, link to ``report.html``, score tables, region figures."""
    run_dir = summary.run_dir
    incomplete = summary.infrastructure_errors.count
    warning = (f'<p style="color:#b42318"><b>INCOMPLETE:</b> {incomplete} episode(s) ungraded by infrastructure '
               "failures; scores over graded ones only</p>" if incomplete else "")
    return (f'<div class="vtb-eval">{STYLE}<p><b>{esc(title_text(summary))}</b> · '
            f'<a href="{esc(Path(report).resolve().as_uri())}" target="_blank">report.html</a>'
            f'{f" · {esc(run_dir)}" if run_dir else ""}</p>{warning}'
            + score_table("", overall_score(summary), summary.epochs)
            + score_table("category", summary.by_category, summary.epochs)
            + region_table(summary.region_iou) + "</div>")


def evaluation_text(summary: RunSummary, report: Path, results: int) -> str:
    """A few lines: what was run, APR and ARS with intervals, where it looked, where the files are."""
    regions = summary.region_iou
    lines = [f"Evaluation: {title_text(summary)}",
             f"  APR {pct(summary.apr)} (95% CI {interval(summary.apr_ci95)})  "
             f"ARS {pct(summary.ars)} (95% CI {interval(summary.ars_ci95)})",
             f"  looked at the right place: {pct(regions.share_iou_ge_0_5)} of {regions.turns} measured turn(s) "
             f"(IoU >= 0.5); pass rate when looked {pct(regions.pass_rate_when_looked)}, when not "
             f"{pct(regions.pass_rate_when_not)}"]
    if summary.infrastructure_errors.count:
        lines.append(f"  INCOMPLETE: {summary.infrastructure_errors.count} episode(s) ungraded by infrastructure "
                     "failures")
    lines += [f"  report: {report}",
              f"  .results: {results} TaskResult(s); .by_category, .region_iou, .usage, .cost for the rest"]
    return "\n".join(lines)
