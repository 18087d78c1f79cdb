"""The root of the ``vtb`` command: the app, the ``tasks`` commands, and the mounting of the others.

``vtb run``, ``vtb ablate`` and ``vtb grade`` live in :mod:`vtb_agents.cli.run`; ``vtb report`` and
``vtb compare`` in :mod:`vtb_agents.cli.report`; ``vtb analyze`` in :mod:`vtb_agents.cli.analyze`;
``vtb transcript`` in :mod:`vtb_agents.cli.transcript`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from vtb_agents.cli.collector import skip_collection_at_exit, tune_for_command
from vtb_agents.cli.common import (check_choice, cli_app, configure_logging, err, fail, load_or_fail, out, print_error,
                                   unexpected_error_line)
from vtb_agents.defaults import SAMPLE

if TYPE_CHECKING:
    from vtb_agents.tasks.model import Task

app = cli_app(help="VisualToolBench on LangGraph.", no_args_is_help=True)
tasks_app = cli_app(help="Import, export, validate, inspect, author and filter tasks.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
DEBUG_ENV = "VTB_DEBUG"


@app.callback()
def main_options(debug: bool = typer.Option(False, "--debug", help="Show a traceback for unexpected errors "
                                            "(also VTB_DEBUG=1)."),
                 verbose: int = typer.Option(0, "--verbose", "-v", count=True,
                                             help="Show the package's log messages: -v INFO, -vv DEBUG."),
                 ) -> None:
    """VisualToolBench on LangGraph."""
    if debug:
        os.environ[DEBUG_ENV] = "1"
    configure_logging(verbose)


def task_row(task: Task) -> dict[str, Any]:
    """The one-line description of a task that ``vtb tasks list`` prints."""
    return {"id": task.id, "category": task.category, "domain": task.domain, "turns": len(task.turns),
            "images": len(task.images), "rubrics": len(task.rubrics)}


@tasks_app.command("list")
def tasks_list(path: str = typer.Argument(SAMPLE, help="Task source (folder, parquet, 'sample', 'hf:...')."),
               as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
               status: Optional[str] = typer.Option(None, help="Only tasks whose review status is this: draft, "
                                                               "reviewed or accepted.")) -> None:
    """One row per task: id, category, domain, turns, images, rubrics (and review status, if any)."""
    from rich.table import Table

    from vtb_agents.tasks.model import REVIEW_STATUSES
    from vtb_agents.terminal import safe_text

    if status is not None:
        check_choice("--status", status, REVIEW_STATUSES)
    loaded = [t for t in load_or_fail(path) if status is None or (t.review and t.review.status == status)]
    reviewed = any(t.review for t in loaded)
    rows = [{**task_row(t), **({"review": t.review.status if t.review else "-"} if reviewed else {})}
            for t in loaded]
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    table = Table(*rows[0].keys()) if rows else Table("id")
    for row in rows:
        table.add_row(*(safe_text(str(v)) for v in row.values()))
    out.print(table)


@tasks_app.command("show")
def tasks_show(task_id: str = typer.Argument(..., help="Task id."),
               tasks: str = typer.Option(SAMPLE, "--tasks", help="Task source.")) -> None:
    """Print one task as JSON (rubrics in VTB format; images by file name)."""
    from vtb_agents.terminal import safe_json

    for task in load_or_fail(tasks):
        if task.id == task_id:
            print(safe_json(task.model_dump(mode="json"), indent=2, ensure_ascii=False))
            return
    fail(f"no task {task_id!r} in {tasks}")


@tasks_app.command("validate")
def tasks_validate(path: str = typer.Argument(..., help="Task source to check."),
                   max_pixels: int = typer.Option(50_000_000, help="Largest image (pixels) accepted."),
                   as_json: bool = typer.Option(False, "--json", help="Problems as JSON lines.")) -> None:
    """Check tasks; exit 1 if there is any error (warnings alone exit 0)."""
    from vtb_agents.tasks.validate import validate_source
    from vtb_agents.terminal import safe

    try:
        problems = validate_source(path, max_pixels)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    for problem in problems:
        if as_json:
            print(json.dumps(problem.__dict__))
        else:
            (err if problem.severity == "error" else out).print(safe(str(problem)), highlight=False,
                                                                soft_wrap=True, markup=False)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    if not as_json:
        out.print(f"{errors} error(s), {warnings} warning(s)")
    if errors:
        raise typer.Exit(1)


@tasks_app.command("import")
def tasks_import(src: str = typer.Argument(..., help="Parquet file/folder or 'hf:PATH_OR_NAME[@split]'."),
                 out_dir: Path = typer.Option(..., "--out", help="Folder to write task folders into.")) -> None:
    """Convert VTB parquet or a local HF dataset into task folders."""
    from vtb_agents.tasks.convert import import_tasks
    from vtb_agents.tasks.sources import iter_source
    from vtb_agents.terminal import safe

    try:
        report = import_tasks(iter_source(src), out_dir)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    for error in report.errors:
        err.print(safe(str(error)), highlight=False, soft_wrap=True, markup=False)
    out.print(f"wrote {report.written} task(s) to {out_dir}; {len(report.errors)} failed")
    if report.errors:
        raise typer.Exit(1)


@tasks_app.command("export")
def tasks_export(src: str = typer.Argument(..., help="Task folders (or any task source)."),
                 parquet: Path = typer.Option(..., "--parquet", help="Parquet file to write.")) -> None:
    """Write tasks in the VTB parquet schema."""
    from vtb_agents.tasks.convert import export_tasks

    count = export_tasks(load_or_fail(src), parquet)
    out.print(f"wrote {count} task(s) to {parquet}")


def _mount_subcommands() -> None:
    from vtb_agents.cli.analyze import analyze_app
    from vtb_agents.cli.annotate import annotate_cli
    from vtb_agents.cli.authoring import authoring_cli
    from vtb_agents.cli.doctor import doctor_cli
    from vtb_agents.cli.extensions import extensions_cli
    from vtb_agents.cli.langsmith import langsmith_app
    from vtb_agents.cli.models import models_cli
    from vtb_agents.cli.report import report_cli
    from vtb_agents.cli.run import run_cli
    from vtb_agents.cli.sandbox import sandbox_app
    from vtb_agents.cli.transcript import transcript_cli

    app.registered_commands += run_cli.registered_commands
    app.registered_commands += extensions_cli.registered_commands
    app.registered_commands += doctor_cli.registered_commands
    app.add_typer(analyze_app, name="analyze", help="Failure taxonomy and judge-human alignment of a run.")
    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(langsmith_app, name="langsmith", help="LangSmith datasets and experiments.")
    app.registered_commands += report_cli.registered_commands
    app.registered_commands += models_cli.registered_commands
    app.registered_commands += annotate_cli.registered_commands
    app.registered_commands += transcript_cli.registered_commands
    tasks_app.registered_commands += authoring_cli.registered_commands


_mount_subcommands()


def main() -> None:
    """Entry point of ``vtb``: file system errors and too-deep input end as one line, not a
    traceback (``--debug`` or ``VTB_DEBUG=1`` shows it). The garbage collector runs as suits a
    command (:mod:`vtb_agents.cli.collector`)."""
    tune_for_command()
    try:
        app()
    except Exception as exc:
        from vtb_agents.runner.saving import storage_cause

        if os.environ.get(DEBUG_ENV) or not isinstance(exc, (OSError, RecursionError)) and storage_cause(exc) is None:
            raise
        print_error(f"{unexpected_error_line(exc)} (--debug shows the traceback)")
        sys.exit(2)
    finally:
        skip_collection_at_exit()


if __name__ == "__main__":
    main()
