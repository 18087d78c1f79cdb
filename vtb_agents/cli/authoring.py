"""``vtb tasks new`` and ``vtb tasks filter``: authoring tasks and the paper's difficulty filter.

Commands on ``authoring_cli``, mounted under ``vtb tasks`` by :mod:`vtb_agents.cli`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vtb_agents.cli.common import cli_app, err, fail, load_or_fail, out

authoring_cli = cli_app()


@authoring_cli.command("new")
def tasks_new(task_id: str = typer.Argument(..., help="Id of the new task (also its folder name)."),
              category: str = typer.Option(..., help="region_switch, hybrid_tool, follow_up, temporal or progressive."),
              domain: str = typer.Option(..., help="stem (or chemistry, maths, ...), medical, finance, sports, "
                                                   "generalist."),
              image: list[Path] = typer.Option(..., "--image", help="An image of the task (repeatable, in order)."),
              root: Path = typer.Option(Path("."), "--root", help="Folder to create the task folder in."),
              turns: Optional[int] = typer.Option(None, min=1,
                                                  help="Turns (default 1, or 2 for multi-turn categories)."),
              ) -> None:
    """Scaffold a task folder (task.json with a rubric template, the images, review status draft); it fails
    validation ("still TODO") until every placeholder is filled in."""
    from vtb_agents.tasks.authoring import AuthoringError, scaffold_task
    from vtb_agents.tasks.validate import STILL_TODO, validate_source

    try:
        folder = scaffold_task(task_id, category=category, domain=domain, images=image, root=root, turns=turns)
    except (AuthoringError, OSError) as exc:
        fail(str(exc))
    errors = [p for p in validate_source(folder) if p.severity == "error"]
    broken = [p for p in errors if p.message != STILL_TODO]
    if broken:  # the template is valid but for its placeholders: say so loudly if it is not
        fail(f"{folder}: scaffold does not validate: {broken[0]}")
    out.print(f"wrote {folder / 'task.json'}: fill in the prompts, golden answers and rubrics (every 'TODO: ', "
              f"{len(errors)} field(s)); `vtb tasks validate {folder}` reports them as still TODO until then",
              highlight=False)


@authoring_cli.command("filter")
def tasks_filter(more_runs: Optional[list[Path]] = typer.Argument(None, metavar="[RUN_DIR]...", show_default=False,
                                                                  help="More run directories."),
                 runs: list[Path] = typer.Option([], "--runs", help="Run directories of the suite: `--runs A B C` "
                                                                    "(or --runs repeated)."),
                 min_fail: int = typer.Option(2, "--min-fail", help="Keep a task failed by at least this many runs."),
                 out_dir: Path = typer.Option(..., "--out", help="Folder for the new suite (must not exist)."),
                 tasks: Optional[str] = typer.Option(None, "--tasks", help="Task source (default: the runs' own)."),
                 as_json: bool = typer.Option(False, "--json", help="Print the outcome table as JSON lines."),
                 ) -> None:
    """The paper's difficulty filter: write the tasks failed by >= --min-fail runs as a new suite."""
    from rich.table import Table

    from vtb_agents.analysis.difficulty import difficulty_filter, open_runs, shared_task_source
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.tasks.local import write_task_dir
    from vtb_agents.tasks.validate import validate_source
    from vtb_agents.terminal import safe, safe_text

    if out_dir.exists():
        fail(f"{out_dir} already exists: choose a new --out")
    try:
        finished = open_runs([*runs, *(more_runs or [])])
        suite = load_or_fail(tasks or shared_task_source(finished))
        report = difficulty_filter(finished, suite, min_fail)
    except (RunError, ValueError) as exc:
        fail(str(exc))
    labels = [Path(r).resolve().name for r in report.runs]
    if as_json:
        for row in report.rows:
            print(json.dumps({"task_id": row.task_id, "outcomes": dict(zip(report.runs, row.outcomes)),
                              "fails": row.fails, "decision": row.decision}))
    else:
        table = Table("task", title=f"outcomes per run (keep: >= {min_fail} fails)")
        for label in labels:
            table.add_column(safe_text(label))
        table.add_column("fails")
        table.add_column("decision")
        for row in report.rows:
            table.add_row(safe_text(row.task_id), *row.outcomes, str(row.fails), row.decision)
        out.print(table)
    kept = set(report.kept)
    out_dir.mkdir(parents=True)
    for task in suite:
        if task.id in kept:
            write_task_dir(task, out_dir)
    undecided = [r.task_id for r in report.rows if r.decision == "undecided"]
    summary = f"kept {len(kept)} of {len(report.rows)} task(s) in {out_dir}; dropped {report.count('drop')}"
    (err if as_json else out).print(safe(summary + (f"; undecided (missing or ungraded in some run): "
                                                    f"{', '.join(undecided)}" if undecided else "")),
                                    soft_wrap=True, markup=False)
    if kept:
        errors = [p for p in validate_source(out_dir) if p.severity == "error"]
        if errors:
            fail(f"the new suite does not validate: {errors[0]}", code=1)
