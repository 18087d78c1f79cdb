"""``vtb report`` and ``vtb compare``: commands on ``report_cli``, to be mounted on the main app with
``app.registered_commands += report_cli.registered_commands`` (kept apart from ``cli.py`` so that
the report's dependencies load only when a report is asked for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vtb_agents.cli.common import cli_app, err, fail, out

report_cli = cli_app(help="Reports of runs.", no_args_is_help=True)


@report_cli.command("report")
def report(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
           tasks: Optional[str] = typer.Option(None, "--tasks", help="Task source (default: the one the run used)."),
           ) -> None:
    """Write RUN_DIR/report.html (a table of every task, scores, tool use, judge counts) and a page per
    task with its images under RUN_DIR/tasks/."""
    from vtb_agents.report import ReportError, write_report

    try:
        path = write_report(run_dir, tasks=tasks)
    except ReportError as exc:
        fail(str(exc))
    out.print(f"report: {path}", highlight=False)


@report_cli.command("compare")
def compare(run_dirs: list[Path] = typer.Argument(..., help="Run directories to compare."),
            out_file: Optional[Path] = typer.Option(None, "--out", help="Also write the comparison as HTML here."),
            as_json: bool = typer.Option(False, "--json", help=(
                "Print the comparison as JSON (runs, coverage, and the paired comparison under 'paired')."))
            ) -> None:
    """Compare runs: model, settings, APR, ARS, per-category APR and tool metrics, and each pair of runs
    task by task (flips, exact McNemar p, bootstrap intervals of the differences in APR and ARS, cost
    difference) over the tasks graded in both; a warning names the tasks not in every run."""
    from vtb_agents.report import ReportError, compare_runs, write_comparison_page
    from vtb_agents.terminal import safe_json, safe_markup

    try:
        comparison = compare_runs(run_dirs)
        if as_json:
            print(safe_json(comparison.to_dict(), indent=2, ensure_ascii=False))
        else:
            out.print(comparison.to_rich())
        coverage = comparison.coverage()
        if coverage:
            err.print(f"[bold yellow]warning:[/] {safe_markup(coverage.text())}", highlight=False, soft_wrap=True)
        if out_file is not None:
            path = write_comparison_page(comparison, out_file)
            (err if as_json else out).print(f"comparison: {path}", highlight=False)
    except ReportError as exc:
        fail(str(exc))
