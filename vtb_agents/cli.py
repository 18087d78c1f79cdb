"""The ``vtb`` command: run suites, and import, export, validate, list and show tasks."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from vtb_agents.graphs.episode import EpisodeSettings
from vtb_agents.results import TaskResult
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import iter_source, load_tasks

app = typer.Typer(help="VisualToolBench on LangGraph.", no_args_is_help=True, add_completion=False)
tasks_app = typer.Typer(help="Import, export, validate and inspect tasks.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print ``message`` as an error and exit with ``code``."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _load(spec: str) -> list[Task]:
    try:
        return load_tasks(spec)
    except (TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(f"{exc}\n(run `vtb tasks validate {spec}` to see every problem)")
        raise  # unreachable: fail() exits


def task_row(task: Task) -> dict[str, Any]:
    """The one-line description of a task that ``vtb tasks list`` prints."""
    return {"id": task.id, "category": task.category, "domain": task.domain, "turns": len(task.turns),
            "images": len(task.images), "rubrics": len(task.rubrics)}


@tasks_app.command("list")
def tasks_list(path: str = typer.Argument("sample", help="Task source (folder, parquet, 'sample', 'hf:...')."),
               as_json: bool = typer.Option(False, "--json", help="One JSON object per line.")) -> None:
    """One row per task: id, category, domain, turns, images, rubrics."""
    rows = [task_row(t) for t in _load(path)]
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    table = Table(*rows[0].keys()) if rows else Table("id")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    out.print(table)


@tasks_app.command("show")
def tasks_show(task_id: str = typer.Argument(..., help="Task id."),
               tasks: str = typer.Option("sample", "--tasks", help="Task source.")) -> None:
    """Print one task as JSON (rubrics in VTB format; images by file name)."""
    for task in _load(tasks):
        if task.id == task_id:
            print(json.dumps(task.model_dump(mode="json"), indent=2, ensure_ascii=False))
            return
    fail(f"no task {task_id!r} in {tasks}")


@tasks_app.command("validate")
def tasks_validate(path: str = typer.Argument(..., help="Task source to check."),
                   max_pixels: int = typer.Option(50_000_000, help="Largest image (pixels) accepted."),
                   as_json: bool = typer.Option(False, "--json", help="Problems as JSON lines.")) -> None:
    """Check tasks; exit 1 if there is any error (warnings alone exit 0)."""
    from vtb_agents.tasks.validate import validate_source

    try:
        problems = validate_source(path, max_pixels)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    for problem in problems:
        if as_json:
            print(json.dumps(problem.__dict__))
        else:
            (err if problem.severity == "error" else out).print(str(problem), highlight=False, soft_wrap=True)
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

    try:
        report = import_tasks(iter_source(src), out_dir)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    for error in report.errors:
        err.print(str(error), highlight=False, soft_wrap=True)
    out.print(f"wrote {report.written} task(s) to {out_dir}; {len(report.errors)} failed")
    if report.errors:
        raise typer.Exit(1)


@tasks_app.command("export")
def tasks_export(src: str = typer.Argument(..., help="Task folders (or any task source)."),
                 parquet: Path = typer.Option(..., "--parquet", help="Parquet file to write.")) -> None:
    """Write tasks in the VTB parquet schema."""
    from vtb_agents.tasks.convert import export_tasks

    count = export_tasks(_load(src), parquet)
    out.print(f"wrote {count} task(s) to {parquet}")


def _summary_table(summary: dict[str, Any]) -> Table:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    table = Table("group", "n", "graded", "APR", "ARS", title=f"{summary.get('model')} (judge: {summary['judge']['model']})")
    table.add_row("overall", str(summary["tasks"]), str(summary["graded"]), pct(summary["apr"]), pct(summary["ars"]))
    for section in ("by_category", "by_domain", "by_turncase"):
        for name, block in summary[section].items():
            table.add_row(f"{section[3:]}: {name}", str(block["n"]), str(block["graded"]),
                          pct(block["apr"]), pct(block["ars"]))
    return table


@app.command("run")
def run(tasks: str = typer.Option("sample", help="Task source: 'sample', a folder, parquet, 'hf:...'."),
        model: str = typer.Option("replay", help="'replay' or 'provider:model' (init_chat_model)."),
        judge: str = typer.Option("rule", help="'rule' (deterministic checks only)."),
        out_dir: Path = typer.Option(Path("runs/latest"), "--out", help="Run directory."),
        resume: bool = typer.Option(False, help="Continue the run in --out, skipping finished tasks."),
        max_tool_rounds: int = typer.Option(20, min=1, help="Tool rounds allowed per turn."),
        prompt_level: str = typer.Option("high", help="System prompt strength: low, mid, high."),
        history: str = typer.Option("golden", help="Earlier assistant turns: 'golden' answers or the 'model''s own."),
        no_tools: bool = typer.Option(False, help="Ablation: no tools at all."),
        no_vision_tool: bool = typer.Option(False, help="Ablation: no python_image_processing."),
        critical_rule: str = typer.Option("weight", help="Critical rubrics by 'weight' (>= 4), 'flag' or 'either'."),
        limit: Optional[int] = typer.Option(None, min=1, help="Run at most this many tasks."),
        category: list[str] = typer.Option([], help="Only these categories (repeatable)."),
        task_id: list[str] = typer.Option([], "--task-id", help="Only these task ids (repeatable)."),
        resumer: str = typer.Option("scripted", help="Who answers clarifying questions: scripted, simulated, human."),
        user_model: Optional[str] = typer.Option(None, help="provider:model of the simulated user."),
        native_tool_images: bool = typer.Option(False, help="Put new images inside tool results (Anthropic, Responses API)."),
        sandbox: str = typer.Option("local", help="Where code runs: local or e2b."),
        judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: OUT/judge_cache.sqlite)."),
        concurrency: int = typer.Option(1, min=1, help="Tasks run at once."),
        task_timeout: Optional[float] = typer.Option(None, min=0.001, help="Seconds a task may take (checked at each model call)."),
        ) -> None:
    """Run tasks with a model, grade them, and write results.jsonl and summary.json to --out.

    Ctrl-C stops cleanly: running tasks finish and are written; continue later with --resume.
    """
    from vtb_agents.runner.executors import LocalExecutor
    from vtb_agents.runner.run import RunConfig, RunError, run_suite

    _check_choice("--prompt-level", prompt_level, ("low", "mid", "high"))
    _check_choice("--history", history, ("golden", "model"))
    _check_choice("--critical-rule", critical_rule, ("weight", "flag", "either"))
    _check_choice("--resumer", resumer, ("scripted", "simulated", "human"))
    selected = _load(tasks)
    if category:
        selected = [t for t in selected if t.category in set(category)]
    if task_id:
        missing = sorted(set(task_id) - {t.id for t in selected})
        if missing:
            fail(f"no task(s) {', '.join(missing)} in {tasks}")
        selected = [t for t in selected if t.id in set(task_id)]
    selected = selected[:limit] if limit else selected
    if not selected:
        fail("no tasks selected")
    config = RunConfig(model=model, judge=judge, tasks=tasks, critical_rule=critical_rule,  # type: ignore[arg-type]
                       no_tools=no_tools, no_vision_tool=no_vision_tool, resumer=resumer, user_model=user_model,
                       sandbox=sandbox,
                       episode=EpisodeSettings(max_tool_rounds=max_tool_rounds, prompt_level=prompt_level,  # type: ignore[arg-type]
                                               history=history, native_tool_images=native_tool_images,
                                               task_timeout_s=task_timeout))  # type: ignore[arg-type]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=err, transient=not sys.stderr.isatty()) as bar:
        job = bar.add_task("tasks", total=len(selected), status="")
        passed = graded = 0

        def on_result(result: TaskResult, done: int, total: int) -> None:
            nonlocal passed, graded
            graded += result.grade.graded
            passed += bool(result.grade.passed)
            bar.update(job, completed=done, status=f"pass {passed}/{graded} · last {result.task_id}")

        stop = threading.Event()

        def on_interrupt(signum: int, frame: Any) -> None:
            stop.set()
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C aborts at once
            bar.update(job, status="stopping: running tasks finish (Ctrl-C again to abort)")

        previous = signal.signal(signal.SIGINT, on_interrupt)
        try:
            summary = run_suite(selected, config, out_dir, resume=resume, progress=on_result, judge_cache=judge_cache,
                                executor=LocalExecutor(concurrency), stop=stop)
        except (RunError, ValueError) as exc:
            fail(str(exc))
        finally:
            signal.signal(signal.SIGINT, previous)
    out.print(_summary_table(summary))
    tm = summary["tool_metrics"]
    out.print(f"tools: proactivity {tm['proactivity']}, success rate {tm['success_rate']}, "
              f"volume {tm['volume']}, by tool {tm['by_tool']}")
    if not summary.get("complete", True):
        err.print(f"interrupted: {summary['tasks']} of {len(selected)} task(s) done; continue with --resume")
        raise typer.Exit(130)
    from vtb_agents.report import write_report

    report = write_report(out_dir)
    out.print(f"results: {out_dir / 'results.jsonl'}  summary: {out_dir / 'summary.json'}  report: {report}")


@app.command("grade")
def grade(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
          judge: str = typer.Option("rule", help="'rule' or 'provider:model' (LLM judge)."),
          critical_rule: str = typer.Option("weight", help="Critical rubrics by 'weight' (>= 4), 'flag' or 'either'."),
          tasks: Optional[str] = typer.Option(None, help="Task source (default: the one the run used)."),
          judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: RUN_DIR/judge_cache.sqlite)."),
          ) -> None:
    """Regrade a finished run without calling the agent model again (cached verdicts are re-used)."""
    from vtb_agents.runner.regrade import regrade_run
    from vtb_agents.runner.run import RunError

    _check_choice("--critical-rule", critical_rule, ("weight", "flag", "either"))
    task_list = _load(tasks) if tasks else None
    try:
        summary = regrade_run(run_dir, judge, critical_rule=critical_rule, tasks=task_list,  # type: ignore[arg-type]
                              judge_cache=judge_cache)
    except (RunError, TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    out.print(_summary_table(summary))
    j = summary["judge"]
    out.print(f"judge {j['model']}: {j['calls']} call(s), {j['cache_hits']} cache hit(s), {j['errors']} error(s), "
              f"{j['checks']} check(s), {j['unjudged']} unjudged")


def _check_choice(option: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        fail(f"{option} must be one of {', '.join(allowed)}, not {value!r}")


def _mount_subcommands() -> None:
    from vtb_agents.cli_analyze import analyze_app
    from vtb_agents.cli_report import report_cli

    app.add_typer(analyze_app, name="analyze", help="Failure taxonomy and judge-human alignment of a run.")
    app.registered_commands += report_cli.registered_commands


_mount_subcommands()


def main() -> None:
    """Entry point for ``python -m vtb_agents.cli``."""
    app()


if __name__ == "__main__":
    main()
