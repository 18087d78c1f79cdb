"""``vtb run``, ``vtb ablate`` and ``vtb grade``: commands on ``run_cli``, mounted by :mod:`vtb_agents.cli`.

Long runs show a progress bar (ETA, pass rate so far) and stop cleanly on Ctrl-C or SIGTERM: running
tasks finish and are written, and ``--resume`` continues; a second Ctrl-C (or SIGTERM) ends the
process at once, whatever its tasks are doing, leaving every result line whole (``cli/interrupt.py``).

``vtb run --model A --model B`` runs every model at once, one run directory each under ``--out``, and
ends with a leaderboard (:func:`run_many`, :mod:`vtb_agents.runner.many`).

Each command that changes a run's results or summary rewrites its report (:func:`refresh_report`):
``vtb run`` and ``vtb grade`` always; an interrupted ``vtb run`` and each setting of ``vtb ablate``
the report they already have, so that no report.html shows figures or verdicts its run no longer has.
"""

from __future__ import annotations

import sys
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence, get_args

import typer

from vtb_agents.cli.interrupt import stop_on_signals
from vtb_agents.cli.common import check_choice, choice, cli_app, err, fail, load_or_fail, out
from vtb_agents.cli.options import REQUEST_TIMEOUT, RunOptions, config_option, with_run_options
from vtb_agents.rundir.lock import run_dir_scope
from vtb_agents.terminal import safe, safe_markup, safe_text

if TYPE_CHECKING:  # the runner, the judges and the results model load when a command runs
    from rich.text import Text

    from vtb_agents.report.terminal import Fitted

    from vtb_agents.config import CriticalRule, RunConfig
    from vtb_agents.results import TaskResult
    from vtb_agents.runner.batch_grade import BatchSettings
    from vtb_agents.runner.budget import Spend
    from vtb_agents.runner.many import ManyPlans, ModelRun
    from vtb_agents.rundir.records import GroupScore, InfrastructureErrors, RegionScore, RunSummary
    from vtb_agents.tasks.model import Task

ProgressFn = Callable[["TaskResult", int, int], None]
run_cli = cli_app()


@contextmanager
def progress_bar(total: int, spend: Spend | None = None) -> Iterator[tuple[ProgressFn, threading.Event]]:
    """A progress callback and a stop event set by Ctrl-C or SIGTERM (a second one aborts at once:
    :mod:`vtb_agents.cli.interrupt`); with ``spend``, the line shows what the command's tasks spent
    so far (USD at the presets' prices and tokens, :mod:`vtb_agents.runner.budget`)."""
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
            if spend is not None:
                spend.add(result)
            bar.update(job, completed=done, total=total_now, status=progress_status(result, counts, spend))

        def on_stop() -> None:
            bar.update(job, status="stopping: running tasks finish (Ctrl-C again to abort at once)")

        with stop_on_signals(stop, on_stop):
            yield on_result, stop


def progress_status(last: TaskResult, counts: dict[str, int], spend: Spend | None = None) -> str:
    """The progress line's status: tasks passed of those graded, what the tasks spent (``spend``: USD,
    ``+?`` when a task's cost is unknown, and tokens), the last task finished."""
    spent = f" · ${spend.usd:.4f}{'+?' if spend.unpriced else ''} · {spend.tokens:,} tok" if spend else ""
    return f"pass {counts['passed']}/{counts['graded']}{spent} · last {safe_markup(last.task_id)}"


def summary_table(summary: RunSummary, epochs: int) -> Fitted:
    """APR and ARS with their 95% intervals, overall and per category, domain and turn case (and
    pass@k / pass^k with ``epochs`` per task), fitted to the terminal: intervals in columns of their
    own when they fit whole, else under their figures (:mod:`vtb_agents.report.terminal`)."""
    from rich.text import Text

    from vtb_agents.report.markup import interval, pct
    from vtb_agents.report.terminal import Col, Fitted, Sheet
    from vtb_agents.rundir.records import GroupScore

    title = safe_markup(f"{summary.model} (judge: {summary.judge.model})")
    if epochs > 1:
        title += f", {epochs} epochs per task"
    failed = summary.infrastructure_errors.count
    if failed:
        title += (f"\n[bold red]INCOMPLETE: {failed} episode(s) ungraded by infrastructure failures; "
                  "scores over graded ones only[/]")
    caption = "95% CI: Student's t over task means (docs/concepts/epochs.md)"
    passes = [Col("pass@k", drop=1), Col("pass^k", drop=2)] if epochs > 1 else []
    group = Col("group", figure=False)
    wide = Sheet([group, Col("n"), Col("graded", drop=3), Col("APR"), Col("APR 95% CI"), Col("ARS"),
                  Col("ARS 95% CI"), *passes], title=title, caption=caption)
    stacked = Sheet([group, Col("n"), Col("graded", drop=3), Col("APR\n95% CI"), Col("ARS\n95% CI"), *passes],
                    title=title, caption=caption)

    def add(name: str | Text, block: GroupScore) -> None:
        more = (pct(block.pass_at_k), pct(block.pass_hat_k)) if passes else ()
        apr, ars = (pct(block.apr), interval(block.apr_ci95)), (pct(block.ars), interval(block.ars_ci95))
        counts = (str(block.n), str(block.graded))
        wide.add_row(name, *counts, *apr, *ars, *more)
        stacked.add_row(name, *counts, "\n".join(apr), "\n".join(ars), *more)

    add("overall", GroupScore.model_validate({**summary.model_dump(include=set(GroupScore.model_fields)),
                                              "n": summary.tasks}))
    for groups, label in ((summary.by_category, "category"), (summary.by_domain, "domain"),
                          (summary.by_turncase, "turn case")):
        for sheet in (wide, stacked):
            sheet.add_row(Text(label, style="bold"), *[""] * (len(sheet.columns) - 1), section=True)
        for name, block in groups.items():
            add(safe_text(name), block)
    return Fitted(wide, stacked)


BATCH_POLL = typer.Option(30.0, "--batch-poll", min=0.0,
                          help="With --judge-batch: seconds between two polls of the batches' status.")


@run_cli.command("run")
@with_run_options
def run(options: RunOptions,
        out_dir: Path = typer.Option(Path("runs/latest"), "--out", help="Run directory."),
        prompt_level: str = config_option("prompt_level"),
        tools: bool = typer.Option(True, "--tools/--no-tools", help="Give the model tools (--no-tools: none at all)."),
        vision_tool: bool = typer.Option(True, "--vision-tool/--no-vision-tool",
                                         help="Offer python_image_processing (--no-vision-tool: ablation without it)."),
        judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: OUT/judge_cache.sqlite)."),
        langsmith_experiment: Optional[str] = typer.Option(
            None, help="Run as LangSmith experiment NAME-<suffix>: tasks pushed as a dataset, "
                       "rubric feedback in LangSmith."),
        langsmith_dataset: Optional[str] = typer.Option(
            None, help="Dataset for --langsmith-experiment (default: vtb:<tasks>)."),
        batch_poll: float = BATCH_POLL,
        ) -> None:
    """Run tasks with a model, grade them, and write results.jsonl, summary.json and report.html to --out.
    With --model given several times: every model at once, one run directory each under --out, one verdict
    cache, and a leaderboard (leaderboard.json, leaderboard.html; docs/how-to/many-models.md)."""
    from vtb_agents.rundir.errors import RunError, StoppedRun

    config = options.config(prompt_level=prompt_level, no_tools=not tools, no_vision_tool=not vision_tool)
    selected = options.selected_tasks()
    if len(options.models) > 1:  # one run per model under --out, and a leaderboard
        if langsmith_experiment:
            fail("--langsmith-experiment runs one model: give one --model")
        run_many(options, config, selected, out_dir, judge_cache, batch_settings(batch_poll))
        return
    if langsmith_experiment:
        from vtb_agents.cli.langsmith import run_langsmith_experiment

        if config.epochs != 1:
            fail("--epochs runs in the run directory only: a LangSmith experiment runs each task once")
        run_langsmith_experiment(selected, config, langsmith_experiment, out_dir=out_dir,
                                 dataset=langsmith_dataset, concurrency=options.concurrency)
        return
    executor = options.make_executor(prestart=True)  # worker processes load the libraries as the runner does
    from vtb_agents.report import preparing_report
    from vtb_agents.runner.budget import BudgetReached, Spend
    from vtb_agents.runner.plan import plan_run
    from vtb_agents.runner.run import EXIT_BUDGET, run_suite

    try:
        plan = plan_run(config, resume_from=out_dir if options.resume else None)  # resolved once: run_suite runs it
    except (RunError, ValueError) as exc:  # a bad spec; a run.json to resume of another format version
        fail(str(exc))
    if config.judge_batch and plan.records.judge.batch_provider is None:
        from vtb_agents.judges.batch import no_batch_api

        err.print(safe(no_batch_api(config.judge)), highlight=False, markup=False, soft_wrap=True)
    resume = run_resume_command(options, config, out_dir, judge_cache)
    spend = Spend(plan.records.model.prices, plan.records.judge.prices)
    with run_dir_scope(out_dir):  # no other writer between the run and its report
        with (progress_bar(len(selected) * config.epochs, spend) as (on_result, stop),
              preparing_report(out_dir, selected, on_result) as progress):
            try:
                summary = run_suite(selected, plan, out_dir, resume=options.resume, progress=progress,
                                    judge_cache=judge_cache, executor=executor, stop=stop,
                                    retry_errors=options.retry_errors,
                                    batch=batch_settings(batch_poll, before=lambda: refresh_report(out_dir)))
            except BudgetReached as exc:  # the summary of what is done is written: the report shows it
                refresh_report(out_dir, only_if_present=True)
                err.print(safe(f"stopped: {exc}: {resume}"), highlight=False, soft_wrap=True, markup=False)
                raise typer.Exit(EXIT_BUDGET) from None
            except StoppedRun as exc:
                fail(f"{exc}: {resume}")
            except (RunError, ValueError) as exc:
                fail(str(exc))
        out.print(summary_table(summary, config.epochs))
        out.print(region_table(summary))
        tm = summary.tool_metrics
        out.print(safe(f"tools: proactivity {tm.proactivity}, success rate {tm.success_rate}, "
                       f"volume {tm.volume}, by tool {tm.by_tool}"), markup=False)  # tool names are the model's
        out.print(cache_line(summary), highlight=False)
        if summary.missing:
            refresh_report(out_dir, only_if_present=True)
            total = len(selected) * config.epochs
            err.print(safe(f"interrupted: {total - summary.missing} of {total} episode(s) done "
                           f"({len(selected)} task(s) × {config.epochs} epoch(s)); continue with: {resume}"),
                      highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(130)
        report = refresh_report(out_dir)
        out.print(f"results: {out_dir / 'results.jsonl'}  summary: {out_dir / 'summary.json'}  report: {report}")
        exit_if_incomplete(summary.infrastructure_errors, f"retry them with: {resume} --retry-errors",
                           causes=failure_causes(out_dir))


def failure_causes(run_dir: Path) -> list[str]:
    """One line per infrastructure outcome among ``run_dir``'s results: how many tasks, and the cause
    of the first by task id (a judge error's verdict, else the episode's error), so that the terminal names it."""
    from vtb_agents.rundir.store import ResultsStore

    first: dict[str, tuple[int, str]] = {}
    for result in sorted(ResultsStore(run_dir).load()[0], key=lambda r: (r.task_id, r.epoch)):
        if not result.infrastructure_failed:
            continue
        judged = [v.justification for v in result.grade.verdicts if v.status == "error" and v.judge != "episode"]
        cause = judged[0] if result.ended == "judge_error" and judged else (
            result.episode.error or result.grade.reason or "no cause recorded")
        count, kept = first.get(result.ended, (0, f"{result.task_id}: {cause}"))
        first[result.ended] = (count + 1, kept)
    return [f"  {outcome} ({count}): {cause.splitlines()[0] if cause else ''}"
            for outcome, (count, cause) in sorted(first.items())]


def refresh_report(run_dir: Path, tasks: Sequence[Task] | None = None, *, only_if_present: bool = False
                   ) -> Path | None:
    """Write ``run_dir``'s report.html and task pages anew from its results and summary (with
    ``only_if_present``: only if it has a report already; None then if it has none). A report that
    cannot be written ends the command with one ``error:`` line saying how to write it later."""
    from vtb_agents.report import ReportError, write_report
    from vtb_agents.report.html import REPORT_FILE

    if only_if_present and not (run_dir / REPORT_FILE).exists():
        return None
    try:
        return write_report(run_dir, tasks=tasks)
    except ReportError as exc:
        fail(f"{exc}; the results and summary.json are written: write the report with `vtb report {run_dir}`")
        raise  # unreachable: fail() exits


def region_table(summary: RunSummary) -> Fitted:
    """Where the model looked (``region_iou`` of the summary): turns measured, the share with best crop
    IoU >= 0.5, the turn pass rate when it looked and when not, turns not located; overall and per category."""
    from vtb_agents.report.markup import pct
    from vtb_agents.report.terminal import Col, Fitted, Sheet

    regions = summary.region_iou
    sheet = Sheet([Col("where it looked", figure=False), Col("turns"), Col("IoU ≥ 0.5"), Col("pass when\nlooked"),
                   Col("pass when\nnot"), Col("not\nlocated", drop=1)],
                  title="Looked at the right place (best crop IoU against the reference's crops)")

    def add(name: str | Text, block: RegionScore) -> None:
        sheet.add_row(name, str(block.turns), pct(block.share_iou_ge_0_5), pct(block.pass_rate_when_looked),
                      pct(block.pass_rate_when_not), str(block.not_located))

    add("overall", regions)
    for name, block in regions.by_category.items():
        add(safe_text(name), block)
    return Fitted(sheet)


def cache_line(summary: RunSummary) -> str:
    """What the caches answered in a run, from ``usage`` and ``judge`` of its summary: model and judge calls
    answered by the model cache, verdicts taken from the verdict cache."""
    usage = summary.usage
    return (f"model cache: {usage.model_from_cache.calls} of {usage.model.calls} model call(s), "
            f"{usage.judge_from_cache.calls} of {usage.judge.calls} judge call(s); "
            f"verdict cache: {summary.judge.cache_hits} verdict(s) reused")


def run_resume_command(options: RunOptions, config: RunConfig, out_dir: Path, judge_cache: Path | None,
                       command: str = "run", *own: str) -> str:
    """The command continuing this ``vtb run`` or ``vtb ablate`` (``own``: its own flags): the same
    settings, task selection and verdict cache, with ``--resume``."""
    from vtb_agents.cli.hints import HintError, config_flags, selection_flags
    from vtb_agents.cli.hints import command as vtb_command

    try:
        flags = config_flags(config, ablation=command == "ablate")
    except HintError as exc:
        return f"(no vtb command continues this run: {exc})"
    cache = ["--judge-cache", str(judge_cache)] if judge_cache else []
    return vtb_command(command, *flags, *selection_flags(options), *own, *cache, "--out", out_dir, "--resume")


def exit_if_incomplete(failed: InfrastructureErrors, *retry: str, causes: Sequence[str] = ()) -> None:
    """Say which tasks infrastructure failures left ungraded (``failed``: a summary's) and why
    (``causes``, one line each: :func:`failure_causes`), print the ``retry`` hints (one line each) and
    exit with ``EXIT_INCOMPLETE``."""
    from vtb_agents.runner.run import EXIT_INCOMPLETE

    if not failed.count:
        return
    ids = failed.task_ids
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    err.print(f"[bold red]incomplete:[/] {failed.count} task(s) ungraded by infrastructure failures "
              f"({safe_markup(shown)})", highlight=False, soft_wrap=True)
    for line in [*causes, *retry]:
        err.print(safe(line), highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(EXIT_INCOMPLETE)


@run_cli.command("ablate")
@with_run_options
def ablate(options: RunOptions,
           out_dir: Path = typer.Option(Path("runs/ablation"), "--out", help="Folder for one run per setting."),
           settings: list[str] = typer.Option([], "--setting", help="Only these settings (repeatable)."),
           judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache shared by the settings (default: "
                                                                 "OUT/SETTING/judge_cache.sqlite each)."),
           batch_poll: float = BATCH_POLL,
           ) -> None:
    """Run the paper's ablations (strong / weak prompt, no vision tool, no tools) and compare them.
    Exits with status 3, as `vtb run`, while any setting has tasks ungraded by infrastructure failures."""
    from vtb_agents.report.ablation import write_ablation_report
    from vtb_agents.rundir.errors import RunError, StoppedRun
    from vtb_agents.runner.ablate import ABLATIONS, run_ablations

    if len(options.models) > 1:
        fail("vtb ablate runs one model: give one --model (or run `vtb ablate` once per model)")
    chosen = settings or list(ABLATIONS)
    for setting in chosen:
        check_choice("--setting", setting, tuple(ABLATIONS))
    base = options.config()
    selected = options.selected_tasks()
    resume = run_resume_command(options, base, out_dir, judge_cache, "ablate",
                                *(item for setting in settings for item in ("--setting", setting)))
    total = len(selected) * len(chosen) * base.epochs
    with ExitStack() as held, progress_bar(total) as (on_result, stop):
        for setting in chosen:  # no other writer in a setting's directory between its run and its report
            held.enter_context(run_dir_scope(out_dir / setting))
        done = {"n": 0}

        def count(result: TaskResult, _done: int, _total: int) -> None:
            done["n"] += 1
            on_result(result, done["n"], total)

        try:
            summaries = run_ablations(selected, base, out_dir, settings=chosen, resume=options.resume,
                                      executor=options.make_executor(), stop=stop, progress=count,
                                      retry_errors=options.retry_errors, judge_cache=judge_cache,
                                      batch=batch_settings(batch_poll))
        except StoppedRun as exc:
            fail(f"{exc}: {resume}")
        except (RunError, ValueError) as exc:
            fail(str(exc))
        for setting in summaries:
            refresh_report(out_dir / setting, only_if_present=True)
    if len(summaries) < len(chosen) or any(s.missing for s in summaries.values()):
        err.print(safe(f"interrupted: continue with: {resume}"), highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(130)
    path, comparison = write_ablation_report(out_dir, chosen, ABLATIONS)
    out.print(comparison.to_rich())
    out.print(f"ablation report: {path}")
    exit_if_incomplete(ablation_failures(summaries), f"retry them with: {resume} --retry-errors")


def ablation_failures(summaries: dict[str, RunSummary], what: str = "setting") -> InfrastructureErrors:
    """The infrastructure failures of all runs of an ablation (``what``: "setting"; of a many-model
    run, "model") by their name (task ids as ``name/id``), with an INCOMPLETE line printed for each
    run that has any."""
    from vtb_agents.rundir.records import InfrastructureErrors

    ids: list[str] = []
    for setting, summary in summaries.items():
        failed = summary.infrastructure_errors
        if failed.count:
            err.print(f"[bold red]INCOMPLETE:[/] {what} {safe_markup(setting)}: {failed.count} of {summary.tasks} "
                      "task(s) ungraded by infrastructure failures; its scores cover graded tasks only",
                      highlight=False, soft_wrap=True)
            ids += [f"{setting}/{task_id}" for task_id in failed.task_ids]
    return InfrastructureErrors(count=len(ids), task_ids=ids)


@run_cli.command("grade")
def grade(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
          judge: Optional[str] = typer.Option(None, help="'rule' or 'provider:model' (default: the run's own "
                                                         "judge, from run.json)."),
          critical_rule: Optional[str] = typer.Option(None, help="Critical rubrics by 'weight' (>= 4), 'flag' or "
                                                                 "'either' (default: the run's own rule)."),
          tasks: Optional[str] = typer.Option(None, help="Task source (default: the one the run used)."),
          judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: RUN_DIR/judge_cache.sqlite)."),
          request_timeout: float = REQUEST_TIMEOUT,
          batch: bool = typer.Option(False, "--batch", help="Ask the verdicts the cache lacks through the judge "
                                                            "provider's batch API (half price, up to 24 h; "
                                                            "docs/how-to/batch-judging.md)."),
          batch_poll: float = typer.Option(30.0, min=0.0, help="With --batch: seconds between two polls of the "
                                                               "batches' status."),
          ) -> None:
    """Regrade a finished run without calling the agent model again (cached verdicts are re-used),
    and rewrite its report. The run keeps its judge and critical rule unless --judge / --critical-rule
    choose others. With --batch the verdicts go through the judge provider's batch API first; a killed
    `vtb grade --batch` run again resumes polling the batches it submitted."""
    from vtb_agents.config import CriticalRule

    rule = choice("--critical-rule", critical_rule, get_args(CriticalRule)) if critical_rule else None
    task_list = load_or_fail(tasks) if tasks else None
    with run_dir_scope(run_dir):  # no other writer between the regrade and its report
        regrade_and_report(run_dir, judge, rule, task_list, tasks, judge_cache, request_timeout,
                           batch_settings(batch_poll) if batch else None)


def regrade_and_report(run_dir: Path, judge: str | None, rule: CriticalRule | None, task_list: list[Task] | None,
                       tasks: str | None, judge_cache: Path | None, request_timeout: float,
                       batch: BatchSettings | None) -> None:
    """`vtb grade`'s work once its options are read: regrade, print the figures, rewrite the report."""
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.runner.regrade import recorded_grading, regrade_run
    from vtb_agents.tasks.errors import TaskLoadError

    try:
        before = recorded_grading(run_dir)
        summary = regrade_run(run_dir, judge, critical_rule=rule, tasks=task_list,
                              judge_cache=judge_cache, request_timeout_s=request_timeout, batch=batch)
    except (RunError, TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    out.print(summary_table(summary, before.epochs))
    out.print(region_table(summary))
    j = summary.judge
    changed = [f"{what} {now} instead of the run's {was} ({option})" for what, option, was, now in (
        ("judge", "--judge", before.judge, j.model),
        ("critical rule", "--critical-rule", before.critical_rule, summary.critical_rule)) if was != now]
    out.print(safe(f"regraded with {'; '.join(changed)}" if changed else
                   f"regraded with the run's own judge {j.model} and critical rule {summary.critical_rule}"),
              highlight=False, markup=False)
    out.print(safe(f"judge {j.model}: {j.calls} call(s), {j.cache_hits} verdict cache hit(s), "
                   f"{j.errors} error(s), {j.checks} check(s), {j.unjudged} unjudged"), markup=False)
    out.print(cache_line(summary), highlight=False)
    out.print(f"report: {refresh_report(run_dir, task_list)}", highlight=False, markup=False)
    if summary.infrastructure_errors.count:
        exit_if_incomplete(summary.infrastructure_errors,
                           *grade_retry_hints(run_dir, summary, tasks, judge_cache, request_timeout),
                           causes=failure_causes(run_dir))


def batch_settings(poll_s: float, before: Callable[[], object] | None = None) -> BatchSettings:
    """How ``--batch`` / ``--judge-batch`` poll: every ``poll_s`` seconds, with a progress line on
    stderr each time (``before``: what a run does once its episodes are done, before the batches)."""
    from vtb_agents.runner.batch_grade import BatchSettings

    return BatchSettings(poll_s=poll_s, before=before,
                         on_progress=lambda line: err.print(safe(line), highlight=False, markup=False, soft_wrap=True))


def grade_retry_hints(run_dir: Path, summary: RunSummary, tasks: str | None, judge_cache: Path | None,
                      request_timeout: float) -> list[str]:
    """What retries the ungraded tasks of a regraded run: ``vtb grade`` for judge errors (the run now
    records the judge), the run's own resume command for episodes that failed."""
    from vtb_agents.cli.hints import HintError, command, resume_recorded_run, run_ids_flags
    from vtb_agents.defaults import DEFAULT_REQUEST_TIMEOUT_S
    from vtb_agents.rundir.read import open_finished_run

    hints = []
    judge_errors = summary.outcomes.get("judge_error", 0)  # outcomes count only those that occurred
    if judge_errors:
        extra = [*(["--tasks", tasks] if tasks else []), *(["--judge-cache", str(judge_cache)] if judge_cache else []),
                 *(["--request-timeout", str(request_timeout)] if request_timeout != DEFAULT_REQUEST_TIMEOUT_S else [])]
        hints.append(f"judge them again with: {command('grade', run_dir, *extra)}")
    if summary.infrastructure_errors.count > judge_errors:  # episodes failed too
        finished = open_finished_run(run_dir)
        config = finished.run.config
        source = load_or_fail(tasks or config.tasks)
        run_ids = list(dict.fromkeys(r.task_id for r in finished.results))  # a retried task has two lines
        selection = run_ids_flags(run_ids, [t.id for t in source])
        try:
            hints.append(f"run their episodes again with: "
                         f"{resume_recorded_run(run_dir, config, selection, '--retry-errors')}")
        except HintError as exc:
            hints.append(f"run their episodes again from Python with the run's RunConfig ({exc})")
    return hints


# ---------------------------------------------------------------- vtb run --model A --model B: one run per model

def many_resume_command(options: RunOptions, config: RunConfig, out_dir: Path, judge_cache: Path | None) -> str:
    """The command continuing this many-model run: every ``--model``, the shared settings, ``--resume``."""
    from vtb_agents.config import DEFAULTS

    models = [item for spec in options.models for item in ("--model", spec)]
    return run_resume_command(options, config.model_copy(update={"model": DEFAULTS.model}), out_dir, judge_cache,
                              "run", *models)


def counted(planned: ManyPlans, on_result: ProgressFn, total: int) -> dict[str, ProgressFn]:
    """Each model's progress callback, feeding the command's one bar with the episodes of all models
    (a run reports its own count, earlier sessions' included; the bar shows their sum)."""
    done = dict.fromkeys(planned.plans, 0)
    lock = threading.Lock()

    def for_model(spec: str) -> ProgressFn:
        def count(result: TaskResult, done_now: int, _total: int) -> None:
            with lock:  # the models' threads report at once
                done[spec] = done_now
                on_result(result, sum(done.values()), total)
        return count

    return {spec: for_model(spec) for spec in planned.plans}


def run_many(options: RunOptions, config: RunConfig, selected: list[Task], out_dir: Path,
             judge_cache: Path | None, batch: BatchSettings) -> None:
    """Plan, run and report every model of ``options.models`` (``config``: the first model's settings,
    which the others share), then write and print the leaderboard."""
    from vtb_agents.report import preparing_report
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.rundir.layout import RUN_FILE
    from vtb_agents.runner.budget import SpendByModel
    from vtb_agents.runner.many import plan_models, run_models

    if options.executor == "ray":  # a Ray executor per model would start and stop one Ray instance each
        fail("--executor ray runs one model: give one --model per command (several models run with "
             "--executor local or processes)")
    if (out_dir / RUN_FILE).exists():
        fail(f"{out_dir} holds the run of one model: a run of several models writes one directory per model "
             "under --out; choose another --out")
    resume = many_resume_command(options, config, out_dir, judge_cache)
    try:
        planned = plan_models(config, options.models, out_dir, judge_cache=judge_cache, resume=options.resume)
    except (RunError, ValueError) as exc:
        fail(str(exc))
    spend = SpendByModel.of({spec: (plan.records.model.prices, plan.records.judge.prices)
                             for spec, plan in planned.plans.items()})
    total = len(selected) * config.epochs * len(planned.plans)
    with ExitStack() as held:
        for run_dir in planned.dirs.values():  # no other writer in a model's directory between its run and report
            held.enter_context(run_dir_scope(run_dir))
        with progress_bar(total, spend) as (on_result, stop), ExitStack() as preparing:
            progress = {spec: preparing.enter_context(preparing_report(planned.dirs[spec], selected, count))
                        for spec, count in counted(planned, on_result, total).items()}
            runs = run_models(selected, planned, resume=options.resume, executor=options.make_executor, stop=stop,
                              progress=progress, retry_errors=options.retry_errors, batch=batch)
        finish(runs, planned, out_dir, resume)


def finish(runs: dict[str, ModelRun], planned: ManyPlans, out_dir: Path, resume: str) -> None:
    """End the command as ``vtb run`` ends: a failed run's error, else an interruption or a budget
    (reports refreshed, the resume command printed), else every report and the leaderboard."""
    from vtb_agents.report.leaderboard import leaderboard_table, write_leaderboard_page
    from vtb_agents.rundir.errors import RunError, StoppedRun
    from vtb_agents.rundir.leaderboard import leaderboard_of, write_leaderboard
    from vtb_agents.runner.budget import BudgetReached
    from vtb_agents.runner.run import EXIT_BUDGET

    failed = {spec: run.error for spec, run in runs.items()
              if run.error is not None and not isinstance(run.error, BudgetReached)}
    for spec, error in failed.items():
        if isinstance(error, StoppedRun):
            fail(f"--model {spec}: {error}: {resume}")
        if isinstance(error, (RunError, ValueError)):
            fail(f"--model {spec}: {error}")
        raise error
    for run in runs.values():  # no report.html may show figures its run no longer has
        refresh_report(run.run_dir, only_if_present=True)
    if any(isinstance(run.error, BudgetReached) for run in runs.values()):  # episodes left: none started after it
        err.print(safe(f"stopped: {planned.budget.reached}: {resume}"), highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(EXIT_BUDGET)
    summaries = {spec: run.summary for spec, run in runs.items() if run.summary is not None}
    missing = sum(summary.missing for summary in summaries.values())
    if missing or len(summaries) < len(runs):
        err.print(safe(f"interrupted: {missing} episode(s) left; continue with: {resume}"), highlight=False,
                  soft_wrap=True, markup=False)
        raise typer.Exit(130)
    for spec, run in runs.items():
        out.print(safe(f"{spec}: {refresh_report(run.run_dir)}"), highlight=False, markup=False)
    board = leaderboard_of(out_dir, planned.dirs)
    out.print(leaderboard_table(board))
    out.print(safe(f"leaderboard: {write_leaderboard(out_dir, board)}  page: {write_leaderboard_page(out_dir, board)}"),
              highlight=False, markup=False)
    exit_if_incomplete(ablation_failures(summaries, "model"), f"retry them with: {resume} --retry-errors")
