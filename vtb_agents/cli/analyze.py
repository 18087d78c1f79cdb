"""``vtb analyze``: analyses of a finished run (failure taxonomy, judge-human alignment).

Mounted by the main CLI as ``app.add_typer(analyze_app, name="analyze")``. Problems with the input
(missing run directory, bad labels file, unknown task ids, bad model spec) exit with code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from vtb_agents.cli.common import cli_app, err, fail, out

analyze_app = cli_app(help="Analyse a finished run: failure taxonomy, judge-human alignment.", no_args_is_help=True)


def input_errors() -> tuple[type[Exception], ...]:
    """Bad input: a bad run directory, a missing file; labels, task sources, results files and specs
    raise ValueError subclasses."""
    from vtb_agents.rundir.errors import RunError

    return RunError, FileNotFoundError, ValueError


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


@analyze_app.command("errors")
def errors(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
           model: str = typer.Option(..., "--model", help="Classifier model, 'provider:model' (init_chat_model)."),
           tasks: Optional[str] = typer.Option(None, "--tasks", help="Task source (default: the run's own)."),
           max_concurrency: int = typer.Option(4, min=1, help="Classifier calls in parallel."),
           ) -> None:
    """Classify why each failed task failed; print counts and write RUN_DIR/failures.json."""
    from rich.table import Table

    from vtb_agents.analysis.failures import CATEGORIES, ERROR, FAILURES_FILE, FailureClassifier, classify_failures
    from vtb_agents.runner.plan import classifier_model
    from vtb_agents.terminal import safe_text

    def classifier() -> FailureClassifier:
        return FailureClassifier(classifier_model(model), name=model, max_concurrency=max_concurrency)

    try:
        report = classify_failures(run_dir, classifier, tasks=tasks)
    except input_errors() as exc:
        fail(str(exc))
    counts = report.counts()
    failed = len(report.failures)
    table = Table("failure category", "tasks", "share",
                  title=safe_text(f"{failed} failed task(s), classifier {report.classifier}"))
    for name, n in counts.items():
        table.add_row(safe_text(name), str(n), _pct(n / failed if failed else None))
    out.print(table)
    by_cat = report.by_task_category()
    if by_cat:
        columns = (*CATEGORIES, ERROR)
        per = Table("task category", *columns, title="by task category")
        for name, block in by_cat.items():
            per.add_row(safe_text(name), *(str(block[c]) for c in columns))
        out.print(per)
    reasons = {"episode_error": "with an errored episode", "ungraded": "ungraded"}
    excluded = ", ".join(f"{len(ids)} {reasons.get(reason, reason)}" for reason, ids in report.excluded.items())
    out.print(f"{report.tasks} task(s): {report.passed} passed, {failed} failed; left out: {excluded}")
    if counts[ERROR]:
        err.print(f"warning: {counts[ERROR]} task(s) could not be classified (category 'error')")
    out.print(f"wrote {Path(run_dir) / FAILURES_FILE}")


@analyze_app.command("alignment")
def alignment(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
              labels: Path = typer.Option(..., "--labels", help="Human labels, JSON lines."),
              tasks: Optional[str] = typer.Option(None, "--tasks", help="Task source (default: the run's own)."),
              as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
              ) -> None:
    """Agreement of the run's verdicts with human labels: overall, by objectivity, Cohen's kappa."""
    from rich.table import Table

    from vtb_agents.analysis.alignment import alignment_report
    from vtb_agents.terminal import safe_json, safe_text

    try:
        report = alignment_report(run_dir, labels, tasks=tasks)
    except input_errors() as exc:
        fail(str(exc))
    if as_json:
        print(safe_json(report.to_dict(), indent=2, ensure_ascii=False))
        return
    table = Table("rubrics", "n", "agreement", title=safe_text(f"judge {report.judge} vs human labels"))
    table.add_row("all", str(report.n), _pct(report.agreement))
    blocks: list[tuple[str, dict[str, Any]]] = [*report.by_objectivity.items(), *report.by_explicitness.items(),
                                                *((f"judged by {k}", v) for k, v in report.by_source.items())]
    for name, block in blocks:
        table.add_row(safe_text(name), str(block["n"]), _pct(block["agreement"]))
    table.add_row("paper (o4-mini judge vs humans)", "", f"about {_pct(report.paper_agreement)}")
    out.print(table)
    kappa = "undefined" if report.kappa is None else f"{report.kappa:.3f}"
    out.print(f"Cohen's kappa: {kappa}")
    skipped = ", ".join(f"{n} {status}" for status, n in report.not_comparable.items()) or "none"
    out.print(f"not comparable (verdict not met/not_met): {skipped}; disagreements: {len(report.disagreements)}")
