"""``vtb run``, ``vtb ablate`` and ``vtb grade``: commands on ``run_cli``, mounted by :mod:`vtb_agents.cli`.

Long runs show a progress bar (ETA, pass rate so far) and stop cleanly on Ctrl-C: running tasks
finish and are written, and ``--resume`` continues; a second Ctrl-C aborts at once.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from vtb_agents.cli.common import check_choice, err, fail, load_or_fail, out
from vtb_agents.episodes.driver import EpisodeSettings
from vtb_agents.results import TaskResult
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task

run_cli = typer.Typer(add_completion=False)

TASKS = typer.Option("sample", help="Task source: 'sample', a folder, parquet, 'hf:...'.")
MODEL = typer.Option("replay", help="'replay', a preset (`vtb models`), 'provider:model' (init_chat_model) or "
                                    "'agent:module:function'.")
MODEL_KWARGS = typer.Option(None, "--model-kwargs", help="JSON object of extra chat-model settings, e.g. "
                                                         "'{\"reasoning_effort\": \"low\"}' or a base_url.")
STRATEGY = typer.Option("react", help="Turn policy: react, zoom, marks, plan, reflect (see 'vtb strategies'), "
                                      "or 'module:function' for your own.")
JUDGE = typer.Option("rule", help="'rule' (deterministic checks only) or 'provider:model' (LLM judge).")
RESUME = typer.Option(False, help="Continue the run in --out, skipping finished tasks.")
CONCURRENCY = typer.Option(1, min=1, help="Tasks run at once.")
LIMIT = typer.Option(None, min=1, help="Run at most this many tasks.")
CATEGORY = typer.Option([], help="Only these categories (repeatable).")
TASK_ID = typer.Option([], "--task-id", help="Only these task ids (repeatable).")
MAX_ROUNDS = typer.Option(20, min=1, help="Tool rounds allowed per turn.")
HISTORY = typer.Option("golden", help="Earlier assistant turns: the 'golden' answers or the 'model''s own.")
CRITICAL = typer.Option("weight", help="Critical rubrics by 'weight' (>= 4), 'flag' or 'either'.")
TOOLS_MODE = typer.Option(None, help="Network tools: live, record or replay (default: replay for 'sample', else live).")
TOOLS_CACHE = typer.Option(None, help="Record/replay cassette of the network tools.")
EXECUTOR = typer.Option("local", help="Where tasks run: 'local' (threads here) or 'ray' (Ray actors).")
RAY_ADDRESS = typer.Option(None, help="Ray cluster to join (default: a new local instance, or RAY_ADDRESS).")
REQUEST_TIMEOUT = typer.Option(120.0, min=0.001, help="Seconds a model or judge HTTP request may take "
                                                      "(never past the task's --task-timeout).")


def make_executor(kind: str, ray_address: str | None, concurrency: int) -> Any:
    """The executor for ``--executor``: local threads, or Ray actors (the ``ray`` extra)."""
    from vtb_agents.runner.executors import LocalExecutor

    check_choice("--executor", kind, ("local", "ray"))
    if ray_address and kind != "ray":
        fail("--ray-address needs --executor ray")
    if kind == "local":
        return LocalExecutor(concurrency)
    try:
        from vtb_agents.runner.ray_executor import RayExecutor
    except ImportError as exc:
        fail(f"{exc} (install the 'ray' extra: pip install 'vtb-agents[ray]')")
    return RayExecutor(address=ray_address, concurrency=concurrency)


def parse_model_kwargs(text: str | None, model: str) -> dict[str, Any] | None:
    """The ``--model-kwargs`` JSON object, or exit with a clear error (it needs a chat model)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"--model-kwargs is not valid JSON: {exc.msg} (at character {exc.pos})")
    if not isinstance(value, dict):
        fail(f"--model-kwargs must be a JSON object, got {type(value).__name__}")
    if model == "replay" or model.startswith("agent:"):
        fail(f"--model-kwargs needs a chat model (a preset or provider:model), not {model!r}")
    return value


def select_tasks(spec: str, category: list[str], task_id: list[str], limit: int | None) -> list[Task]:
    """The tasks of ``spec`` filtered by category and id, cut to ``limit``; exit if none is left."""
    selected = load_or_fail(spec)
    if category:
        selected = [t for t in selected if t.category in set(category)]
    if task_id:
        missing = sorted(set(task_id) - {t.id for t in selected})
        if missing:
            fail(f"no task(s) {', '.join(missing)} in {spec}")
        selected = [t for t in selected if t.id in set(task_id)]
    selected = selected[:limit] if limit else selected
    if not selected:
        fail("no tasks selected")
    return selected


def network_options(mode: str | None, cache: Path | None) -> tuple[str | None, str | None]:
    """(tools mode, cassette) as given; ``None`` lets the run choose (replay for ``sample``)."""
    if mode is not None:
        check_choice("--tools-mode", mode, ("live", "record", "replay"))
        if mode != "live" and cache is None:
            fail(f"--tools-mode {mode} needs --tools-cache PATH")
    return mode, str(cache) if cache else None


@contextmanager
def progress_bar(total: int) -> Iterator[tuple[Callable[[TaskResult, int, int], None], threading.Event]]:
    """A progress callback and a stop event set by Ctrl-C (a second Ctrl-C aborts)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=err, transient=not sys.stderr.isatty()) as bar:
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


def summary_table(summary: dict[str, Any]) -> Table:
    """APR and ARS overall and per category, domain and turn case."""
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    title = f"{summary.get('model')} (judge: {summary['judge']['model']})"
    failed = (summary.get("infrastructure_errors") or {}).get("count", 0)
    if failed:
        title += f"\n[bold red]INCOMPLETE: {failed} task(s) ungraded by infrastructure failures; scores over graded tasks only[/]"
    table = Table("group", "n", "graded", "APR", "ARS", title=title)
    table.add_row("overall", str(summary["tasks"]), str(summary["graded"]), pct(summary["apr"]), pct(summary["ars"]))
    for section in ("by_category", "by_domain", "by_turncase"):
        for name, block in summary[section].items():
            table.add_row(f"{section[3:]}: {name}", str(block["n"]), str(block["graded"]), pct(block["apr"]), pct(block["ars"]))
    return table


@run_cli.command("run")
def run(tasks: str = TASKS, model: str = MODEL, judge: str = JUDGE, strategy: str = STRATEGY,
        model_kwargs: Optional[str] = MODEL_KWARGS,
        out_dir: Path = typer.Option(Path("runs/latest"), "--out", help="Run directory."),
        resume: bool = RESUME, max_tool_rounds: int = MAX_ROUNDS,
        prompt_level: str = typer.Option("high", help="System prompt strength: low, mid, high."),
        history: str = HISTORY,
        no_tools: bool = typer.Option(False, help="Ablation: no tools at all."),
        no_vision_tool: bool = typer.Option(False, help="Ablation: no python_image_processing."),
        critical_rule: str = CRITICAL, limit: Optional[int] = LIMIT, category: list[str] = CATEGORY,
        task_id: list[str] = TASK_ID,
        resumer: str = typer.Option("scripted", help="Who answers clarifying questions: scripted, simulated, human."),
        user_model: Optional[str] = typer.Option(None, help="provider:model of the simulated user."),
        native_tool_images: bool = typer.Option(False, help="Put new images inside tool results (Anthropic, Responses API)."),
        max_image_side: int = typer.Option(2048, min=64, help="Images sent to the model are downscaled to this longer side."),
        sandbox: str = typer.Option("local", help="Where code runs: local or e2b."),
        judge_cache: Optional[Path] = typer.Option(None, help="Verdict cache (default: OUT/judge_cache.sqlite)."),
        concurrency: int = CONCURRENCY,
        rps: Optional[float] = typer.Option(None, min=0.001, help="At most this many model requests per second."),
        task_timeout: Optional[float] = typer.Option(None, min=0.001, help="Seconds a task's episode may take: checked at every model call, tool call and graph step (agent: runs too); stops running code."),
        tools_mode: Optional[str] = TOOLS_MODE, tools_cache: Optional[Path] = TOOLS_CACHE,
        executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS,
        request_timeout: float = REQUEST_TIMEOUT,
        retry_errors: bool = typer.Option(False, "--retry-errors", help="With --resume: run again the tasks that "
                                          "infrastructure failures (provider, sandbox, storage) left ungraded."),
        sandbox_strict: bool = typer.Option(False, "--sandbox-strict", help="Refuse to run code without full isolation (bwrap)."),
        sandbox_network: bool = typer.Option(False, "--sandbox-network",
                                             help="Let the E2B sandbox reach the internet (off by default; recorded in the results)."),
        langsmith_experiment: Optional[str] = typer.Option(
            None, help="Run as LangSmith experiment NAME-<suffix>: tasks pushed as a dataset, rubric feedback in LangSmith."),
        langsmith_dataset: Optional[str] = typer.Option(None, help="Dataset for --langsmith-experiment (default: vtb:<tasks>)."),
        ) -> None:
    """Run tasks with a model, grade them, and write results.jsonl, summary.json and report.html to --out."""
    from vtb_agents.runner.run import RunConfig, RunError, run_suite

    check_choice("--prompt-level", prompt_level, ("low", "mid", "high"))
    check_choice("--history", history, ("golden", "model"))
    check_choice("--critical-rule", critical_rule, ("weight", "flag", "either"))
    check_choice("--resumer", resumer, ("scripted", "simulated", "human"))
    if sandbox_network and sandbox != "e2b":
        fail("--sandbox-network needs --sandbox e2b (the local sandbox never has network access)")
    mode, cassette = network_options(tools_mode, tools_cache)
    if retry_errors and not resume:
        fail("--retry-errors needs --resume (it re-runs the failed tasks of an existing run)")
    extra = parse_model_kwargs(model_kwargs, model)
    selected = select_tasks(tasks, category, task_id, limit)
    config = RunConfig(model=model, judge=judge, tasks=tasks, strategy=strategy,
                       critical_rule=critical_rule,  # type: ignore[arg-type]
                       model_kwargs=extra, no_tools=no_tools, no_vision_tool=no_vision_tool, resumer=resumer,
                       user_model=user_model,
                       sandbox=sandbox, sandbox_strict=sandbox_strict, sandbox_network=sandbox_network,
                       tools_mode=mode, tools_cache=cassette,
                       requests_per_second=rps, request_timeout_s=request_timeout,
                       episode=EpisodeSettings(max_tool_rounds=max_tool_rounds, prompt_level=prompt_level,  # type: ignore[arg-type]
                                               history=history, native_tool_images=native_tool_images,  # type: ignore[arg-type]
                                               max_image_side=max_image_side, task_timeout_s=task_timeout))
    if langsmith_experiment:
        from vtb_agents.cli.langsmith import run_langsmith_experiment

        run_langsmith_experiment(selected, config, langsmith_experiment, out_dir=out_dir,
                                 dataset=langsmith_dataset, concurrency=concurrency)
        return
    with progress_bar(len(selected)) as (on_result, stop):
        try:
            summary = run_suite(selected, config, out_dir, resume=resume, progress=on_result, judge_cache=judge_cache,
                                executor=make_executor(executor, ray_address, concurrency), stop=stop,
                                retry_errors=retry_errors)
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
def ablate(tasks: str = TASKS, model: str = MODEL, judge: str = JUDGE, strategy: str = STRATEGY,
           model_kwargs: Optional[str] = MODEL_KWARGS,
           out_dir: Path = typer.Option(Path("runs/ablation"), "--out", help="Folder for one run per setting."),
           settings: list[str] = typer.Option([], "--setting", help="Only these settings (repeatable)."),
           resume: bool = RESUME, concurrency: int = CONCURRENCY, limit: Optional[int] = LIMIT,
           category: list[str] = CATEGORY, task_id: list[str] = TASK_ID, max_tool_rounds: int = MAX_ROUNDS,
           history: str = HISTORY, critical_rule: str = CRITICAL,
           tools_mode: Optional[str] = TOOLS_MODE, tools_cache: Optional[Path] = TOOLS_CACHE,
           executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS) -> None:
    """Run the paper's ablations (strong / weak prompt, no vision tool, no tools) and compare them."""
    from vtb_agents.report.ablation import write_ablation_report
    from vtb_agents.runner.ablate import ABLATIONS, run_ablations
    from vtb_agents.runner.run import RunConfig, RunError

    chosen = settings or list(ABLATIONS)
    for setting in chosen:
        check_choice("--setting", setting, tuple(ABLATIONS))
    check_choice("--history", history, ("golden", "model"))
    check_choice("--critical-rule", critical_rule, ("weight", "flag", "either"))
    mode, cassette = network_options(tools_mode, tools_cache)
    extra = parse_model_kwargs(model_kwargs, model)
    selected = select_tasks(tasks, category, task_id, limit)
    base = RunConfig(model=model, judge=judge, tasks=tasks, strategy=strategy,
                     critical_rule=critical_rule,  # type: ignore[arg-type]
                     model_kwargs=extra, tools_mode=mode, tools_cache=cassette,
                     episode=EpisodeSettings(max_tool_rounds=max_tool_rounds, history=history))  # type: ignore[arg-type]
    with progress_bar(len(selected) * len(chosen)) as (on_result, stop):
        done = {"n": 0}

        def count(result: TaskResult, _done: int, _total: int) -> None:
            done["n"] += 1
            on_result(result, done["n"], len(selected) * len(chosen))

        try:
            summaries = run_ablations(selected, base, out_dir, settings=chosen, resume=resume,
                                      executor=make_executor(executor, ray_address, concurrency), stop=stop,
                                      progress=count)
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
    from vtb_agents.runner.regrade import regrade_run
    from vtb_agents.runner.run import RunError

    check_choice("--critical-rule", critical_rule, ("weight", "flag", "either"))
    task_list = load_or_fail(tasks) if tasks else None
    try:
        summary = regrade_run(run_dir, judge, critical_rule=critical_rule, tasks=task_list,  # type: ignore[arg-type]
                              judge_cache=judge_cache, request_timeout_s=request_timeout)
    except (RunError, TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    out.print(summary_table(summary))
    j = summary["judge"]
    out.print(f"judge {j['model']}: {j['calls']} call(s), {j['cache_hits']} cache hit(s), {j['errors']} error(s), "
              f"{j['checks']} check(s), {j['unjudged']} unjudged")
    exit_if_incomplete(summary, f"vtb grade {run_dir} (judge errors) or vtb run --out {run_dir} --resume --retry-errors")


@run_cli.command("strategies")
def strategies() -> None:
    """List the built-in strategies (turn policies) for --strategy, one line each."""
    from vtb_agents.strategies import BUILTIN

    table = Table("strategy", "what it does", "after", title="strategies (--strategy NAME, or module:function)")
    for strategy in BUILTIN.values():
        table.add_row(strategy.name, strategy.summary, strategy.source)
    out.print(table)
