"""``vtb run``, ``vtb ablate`` and ``vtb grade``: commands on ``run_cli``, mounted by :mod:`vtb_agents.cli`.

Long runs show a progress bar (ETA, pass rate so far) and stop cleanly on Ctrl-C: running tasks
finish and are written, and ``--resume`` continues; a second Ctrl-C aborts at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, get_args

import typer

from vtb_agents.cli.common import check_choice, choice, cli_app, err, fail, load_or_fail, out
from vtb_agents.cli.options import CRITICAL, JUDGE, REQUEST_TIMEOUT, RunOptions, with_run_options
from vtb_agents.defaults import DEFAULT_PROMPT_LEVEL

if TYPE_CHECKING:  # the runner, the judges and the results model load when a command runs
    from rich.table import Table

    from vtb_agents.results import TaskResult
    from vtb_agents.tasks.model import Task

ProgressFn = Callable[["TaskResult", int, int], None]
run_cli = cli_app()


@contextmanager
def progress_bar(total: int) -> Iterator[tuple[ProgressFn, threading.Event]]:
    """A progress callback and a stop event set by Ctrl-C (a second Ctrl-C aborts)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=err.console, transient=not sys.stderr.isatty()) as bar:
        job = bar.add_task("tasks", total=total, status="")
        counts = {"passed": 0, "graded": 0}
        stop = threading.Event()

        def on_result(result: TaskResult, done: int, total_now: int) -> None:
            counts["graded"] += result.grade.graded
            counts["passed"] += bool(result.grade.passed)
            bar.update(job, completed=done, total=total_now,
                       status=f"pass {counts['passed']}/{counts['graded']} · last {result.task_id}")

        def on_interrupt(signum: int, frame: Any) -> None:
            stop.set()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            bar.update(job, status="stopping: running tasks finish (Ctrl-C again to abort)")

        previous = signal.signal(signal.SIGINT, on_interrupt)
        try:
            yield on_result, stop
        finally:
            signal.signal(signal.SIGINT, previous)


@contextmanager
def with_report_images(out_dir: Path, tasks: Sequence[Task], progress: ProgressFn) -> Iterator[ProgressFn]:
    """``progress``, which also makes the report's images in the background from the first result on
    (:class:`~vtb_agents.report.ReportPreparer`), so that ``report.html`` is quick once the run ends.
    It starts only then: by its first result the run directory is checked and locked as this run's."""
    from vtb_agents.report import ReportPreparer

    with ExitStack() as stack:
        preparers: list[ReportPreparer] = []

        def on_result(result: TaskResult, done: int, total: int) -> None:
            progress(result, done, total)
            if not preparers:
                preparers.append(stack.enter_context(ReportPreparer(out_dir, tasks)))
            preparers[0].add(result)

        yield on_result


def summary_table(summary: dict[str, Any]) -> Table:
    """APR and ARS overall and per category, domain and turn case."""
    from rich.table import Table

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    title = f"{summary.get('model')} (judge: {summary['judge']['model']})"
    failed = (summary.get("infrastructure_errors") or {}).get("count", 0)
    if failed:
        title += (f"\n[bold red]INCOMPLETE: {failed} task(s) ungraded by infrastructure failures; "
                  "scores over graded tasks only[/]")
    table = Table("group", "n", "graded", "APR", "ARS", title=title)
    table.add_row("overall", str(summary["tasks"]), str(summary["graded"]), pct(summary["apr"]), pct(summary["ars"]))
    for section in ("by_category", "by_domain", "by_turncase"):
        for name, block in summary[section].items():
            table.add_row(f"{section[3:]}: {name}", str(block["n"]), str(block["graded"]), pct(block["apr"]),
                          pct(block["ars"]))
    return table


@run_cli.command("run")
@with_run_options
def run(options: RunOptions,
        out_dir: Path = typer.Option(Path("runs/latest"), "--out", help="Run directory."),
        prompt_level: str = typer.Option(DEFAULT_PROMPT_LEVEL, help="System prompt strength: low, mid, high."),
        tools: bool = typer.Option(True, "--tools/--no-tools", help="Give the model tools (--no-tools: none at all)."),
        vision_tool: bool = typer.Option(True, "--vision-tool/--no-vision-tool",
                                         help="Offer python_image_processing (--no-vision-tool: ablation without it)."),
        judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: OUT/judge_cache.sqlite)."),
        langsmith_experiment: Optional[str] = typer.Option(
            None, help="Run as LangSmith experiment NAME-<suffix>: tasks pushed as a dataset, "
                       "rubric feedback in LangSmith."),
        langsmith_dataset: Optional[str] = typer.Option(
            None, help="Dataset for --langsmith-experiment (default: vtb:<tasks>)."),
        ) -> None:
    """Run tasks with a model, grade them, and write results.jsonl, summary.json and report.html to --out."""
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.runner.run import run_suite

    config = options.config(prompt_level=prompt_level, no_tools=not tools, no_vision_tool=not vision_tool)
    selected = options.selected_tasks()
    if langsmith_experiment:
        from vtb_agents.cli.langsmith import run_langsmith_experiment

        run_langsmith_experiment(selected, config, langsmith_experiment, out_dir=out_dir,
                                 dataset=langsmith_dataset, concurrency=options.concurrency)
        return
    with progress_bar(len(selected)) as (on_result, stop), with_report_images(out_dir, selected, on_result) as progress:
        try:
            summary = run_suite(selected, config, out_dir, resume=options.resume, progress=progress,
                                judge_cache=judge_cache, executor=options.make_executor(), stop=stop,
                                retry_errors=options.retry_errors)
        except (RunError, ValueError) as exc:
            fail(str(exc))
    out.print(summary_table(summary))
    tm = summary["tool_metrics"]
    out.print(f"tools: proactivity {tm['proactivity']}, success rate {tm['success_rate']}, "
              f"volume {tm['volume']}, by tool {tm['by_tool']}")
    if summary.get("missing"):
        err.print(f"interrupted: {summary['tasks']} of {len(selected)} task(s) done; continue with --resume")
        raise typer.Exit(130)
    from vtb_agents.report import write_report

    report = write_report(out_dir)
    out.print(f"results: {out_dir / 'results.jsonl'}  summary: {out_dir / 'summary.json'}  report: {report}")
    exit_if_incomplete(summary, f"vtb run ... --out {out_dir} --resume --retry-errors")


def exit_if_incomplete(summary: dict[str, Any], retry: str) -> None:
    """Say which tasks infrastructure failures left ungraded and exit with ``EXIT_INCOMPLETE``."""
    from vtb_agents.runner.run import EXIT_INCOMPLETE

    failed = summary.get("infrastructure_errors") or {}
    if not failed.get("count"):
        return
    ids = failed.get("task_ids") or []
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    err.print(f"[bold red]incomplete:[/] {failed['count']} task(s) ungraded by infrastructure failures "
              f"({shown}); retry them with: {retry}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INCOMPLETE)


@run_cli.command("ablate")
@with_run_options
def ablate(options: RunOptions,
           out_dir: Path = typer.Option(Path("runs/ablation"), "--out", help="Folder for one run per setting."),
           settings: list[str] = typer.Option([], "--setting", help="Only these settings (repeatable)."),
           ) -> None:
    """Run the paper's ablations (strong / weak prompt, no vision tool, no tools) and compare them."""
    from vtb_agents.report.ablation import write_ablation_report
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.runner.ablate import ABLATIONS, run_ablations

    chosen = settings or list(ABLATIONS)
    for setting in chosen:
        check_choice("--setting", setting, tuple(ABLATIONS))
    base = options.config()
    selected = options.selected_tasks()
    with progress_bar(len(selected) * len(chosen)) as (on_result, stop):
        done = {"n": 0}

        def count(result: TaskResult, _done: int, _total: int) -> None:
            done["n"] += 1
            on_result(result, done["n"], len(selected) * len(chosen))

        try:
            summaries = run_ablations(selected, base, out_dir, settings=chosen, resume=options.resume,
                                      executor=options.make_executor(), stop=stop, progress=count,
                                      retry_errors=options.retry_errors)
        except (RunError, ValueError) as exc:
            fail(str(exc))
    if len(summaries) < len(chosen) or any(s.get("missing") for s in summaries.values()):
        err.print("interrupted: continue with --resume")
        raise typer.Exit(130)
    path, comparison = write_ablation_report(out_dir, chosen, ABLATIONS)
    out.print(comparison.to_rich())
    out.print(f"ablation report: {path}")


@run_cli.command("grade")
def grade(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
          judge: str = JUDGE, critical_rule: str = CRITICAL,
          tasks: Optional[str] = typer.Option(None, help="Task source (default: the one the run used)."),
          judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: RUN_DIR/judge_cache.sqlite)."),
          request_timeout: float = REQUEST_TIMEOUT,
          ) -> None:
    """Regrade a finished run without calling the agent model again (cached verdicts are re-used)."""
    from vtb_agents.judges.grade import CriticalRule
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.runner.regrade import regrade_run
    from vtb_agents.tasks.errors import TaskLoadError

    rule = choice("--critical-rule", critical_rule, get_args(CriticalRule))
    task_list = load_or_fail(tasks) if tasks else None
    try:
        summary = regrade_run(run_dir, judge, critical_rule=rule, tasks=task_list,
                              judge_cache=judge_cache, request_timeout_s=request_timeout)
    except (RunError, TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    out.print(summary_table(summary))
    j = summary["judge"]
    out.print(f"judge {j['model']}: {j['calls']} call(s), {j['cache_hits']} cache hit(s), {j['errors']} error(s), "
              f"{j['checks']} check(s), {j['unjudged']} unjudged")
    exit_if_incomplete(summary,
                       f"vtb grade {run_dir} (judge errors) or vtb run --out {run_dir} --resume --retry-errors")


@run_cli.command("strategies")
def strategies() -> None:
    """List the built-in strategies (turn policies) for --strategy, one line each."""
    from rich.table import Table

    from vtb_agents.strategies import BUILTIN

    table = Table("strategy", "what it does", "after", title="strategies (--strategy NAME, or module:function)")
    for strategy in BUILTIN.values():
        table.add_row(strategy.name, strategy.summary, strategy.source)
    out.print(table)
