"""Run a suite: for each task an episode in its own sandbox, a grade, a line in ``results.jsonl``.

The run directory holds ``run.json`` (what was run, how), ``results.jsonl``, ``artifacts/`` and
``summary.json``. Results already written are never rewritten: a run resumes by skipping the task
ids it has, and refuses to mix settings or to overwrite another run. With ``epochs`` K (``vtb run
--epochs K``) each task runs K times as independent episodes (own checkpoint thread, own sandbox,
own judge verdicts); a result line is one (task, epoch), and a resume skips the pairs it has.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

from vtb_agents.version import __version__
from vtb_agents.analysis.cost import recorded_prices
from vtb_agents.analysis.metrics import summarize
from vtb_agents.analysis.regions import score_regions
from vtb_agents.episodes.driver import episode_thread_id, run_episode
from vtb_agents.episodes.recorder import TranscriptRecorder
from vtb_agents.episodes.regions import has_reference_code, locate_untracked
from vtb_agents.judges.bounded import judge_time_limit
from vtb_agents.judges.graph import grade_episode
from vtb_agents.judges.cache import judge_for_epoch
from vtb_agents.models.cache import ModelCacheMiss, task_model_calls
from vtb_agents.models.usage import track_usage
from vtb_agents.results import Episode, Outcome, TaskGrade, TaskResult, TaskUsage, is_infrastructure, task_outcome
from vtb_agents.rundir.create import prepare_run_dir as create_run_dir
from vtb_agents.rundir.create import write_summary
from vtb_agents.rundir.errors import RunError, StoppedRun
from vtb_agents.rundir.layout import ARTIFACTS_DIR, CHECKPOINT_FILE, JUDGE_CACHE_FILE, RUN_FILE, SUMMARY_FILE
from vtb_agents.rundir.lock import run_dir_lock
from vtb_agents.rundir.read import read_record, recorded_pacing
from vtb_agents.rundir.records import RunRecord, RunSummary, new_run_id
from vtb_agents.rundir.store import ResultsStore, episode_key, latest_results
from vtb_agents.rundir.transcripts import write_transcript
from vtb_agents.config import PACING_KEYS, RunConfig
from vtb_agents.runner.batch_grade import BatchSettings
from vtb_agents.runner.budget import Budget, BudgetReached, run_budget
from vtb_agents.runner.executors import Executor, LocalExecutor, RunJob, TaskEpoch
from vtb_agents.runner.outcomes import failed_episode
from vtb_agents.runner.plan import NO_OBJECTS, PlanRecords, RunObjects, RunPlan, plan_run
from vtb_agents.runner.preflight import check_plan, require
from vtb_agents.runner.regrade import regrade_run
from vtb_agents.runner.resources import RunResources, open_plan
from vtb_agents.runner.saving import ResultSaver, storage_cause
from vtb_agents.sandbox.base import Sandbox, SandboxError
from vtb_agents.tasks.model import Task
from vtb_agents.tracing import install_tracing_from_env

__all__ = ["CHECKPOINT_FILE", "EXIT_BUDGET", "EXIT_INCOMPLETE", "JUDGE_CACHE_FILE", "RUN_FILE", "SUMMARY_FILE",
           "RunConfig", "RunError", "RunObjects", "RunResources", "episode_for_task", "prepare_run_dir", "run_suite",
           "run_task"]

_log = logging.getLogger(__name__)
EXIT_INCOMPLETE = 3
"""Exit status of ``vtb run`` / ``vtb grade`` while infrastructure failures leave tasks ungraded."""
EXIT_BUDGET = 4
"""Exit status of ``vtb run`` stopped by its ``--cost-limit`` or ``--token-limit`` (runner/budget.py)."""


ProgressFn = Callable[[TaskResult, int, int], None]


def run_task(task: Task, config: RunConfig, resources: RunResources, *, epoch: int = 1) -> TaskResult:
    """Run and grade one episode of ``task`` (its ``epoch``-th run); its ``outcome`` says how it ended
    (docs/concepts/outcomes.md).

    A failure is recorded, never raised, except a miss of a cache-only model cache
    (:class:`~vtb_agents.models.cache.ModelCacheMiss`), which stops the run. The model's own
    (task timeout, step limit) keeps the turns finished before it and is graded, unanswered turns
    failing their rubrics; an infrastructure failure (provider, sandbox, storage, harness) leaves
    the task ungraded; so does a judge that fails (``judge_error``), and grading that fails for any
    other reason (``harness_error``). Grading has its own window of ``--task-timeout`` (a timed-out
    episode is still graded), each judge call at most :func:`judge_time_limit`. With a run
    directory (``resources.run_dir``) the episode's transcript is written there (for ``epoch``)
    before the result is returned, failed episodes included (docs/reference/transcripts.md).
    """
    started = time.perf_counter()
    recorder = TranscriptRecorder(resources.artifacts) if resources.artifacts is not None else None
    with task_model_calls(resources.model_cache, task.id, epoch) as calls:
        with track_usage(config.episode.task_token_limit) as model_usage:
            try:
                with resources.open_sandbox() as sandbox:
                    episode = episode_for_task(task, config, resources, sandbox, epoch=epoch, recorder=recorder)
                episode.outcome = episode.ended
            except Exception as exc:  # recorded per task: one failing task must not end a 1,204-task run
                if storage_cause(exc) is not None:
                    raise  # a full disk is the run's problem, not the task's: the run stops (runner/saving.py)
                episode = failed_episode(task.id, config.model, exc)
        if calls is not None:
            calls.raise_miss()  # a cache-only run that missed stops: the task is not written
        measure_regions(task, episode, config, resources)
        outcome: Outcome | None = None
        with track_usage() as judge_usage:
            try:
                grade = grade_episode(task, episode, judge_for_epoch(resources.judge, epoch), config.critical_rule,
                                      callbacks=[recorder] if recorder is not None else None,
                                      time_limit_s=config.episode.task_timeout_s,
                                      call_limit_s=judge_time_limit(config.request_timeout_s))
            except Exception as exc:  # a grading failure is this task's, never the run's
                if storage_cause(exc) is not None:
                    raise
                grade = TaskGrade(reason=f"grading failed: {type(exc).__name__}: {exc}",
                                  critical_rule=config.critical_rule)
                outcome = "harness_error"  # judge failures are verdicts (judges/bounded.py): this is ours
        if calls is not None:
            calls.raise_miss()
    if recorder is not None and resources.run_dir is not None:
        write_transcript(resources.run_dir, recorder.transcript(task.id), epoch)
    return TaskResult(
        task_id=task.id, epoch=epoch, category=task.category, category_raw=task.category_raw, domain=task.domain,
        domain_raw=task.domain_raw, turncase=task.turncase, model=config.model, strategy=config.strategy_spec,
        episode=episode, grade=grade, duration_s=round(time.perf_counter() - started, 4),
        outcome=outcome or task_outcome(episode, grade),
        usage=TaskUsage(model=model_usage.total, model_by_turn=model_usage.by_turn, judge=judge_usage.total,
                        model_from_cache=model_usage.from_cache, judge_from_cache=judge_usage.from_cache),
    )


def episode_for_task(task: Task, config: RunConfig, resources: RunResources, sandbox: Sandbox, *,
                     epoch: int = 1, recorder: TranscriptRecorder | None = None) -> Episode:
    """Run ``task``'s episode (of ``epoch``, on its own thread) in ``sandbox`` with the run's strategy,
    into ``recorder``'s transcript (errors propagate)."""
    if resources.artifacts is None:
        raise RunError("run resources have no artifact store: open them with a run directory's artifacts")
    if resources.checkpointer is not None:  # an episode re-run after a crash starts afresh
        resources.checkpointer.delete_thread(episode_thread_id(task.id, epoch))
    model = resources.models(task) if resources.models is not None else None
    return run_episode(task, model, resources.tools, sandbox=sandbox, graph=resources.graph(task.category),
                       artifacts=resources.artifacts, model_name=config.model, settings=config.episode,
                       checkpointer=resources.checkpointer, resumer=resources.resumer, strategy=resources.strategy,
                       epoch=epoch, recorder=recorder)


def measure_regions(task: Task, episode: Episode, config: RunConfig, resources: RunResources) -> None:
    """Record on each turn the reference's crops and ``best_crop_iou`` (docs/concepts/region-iou.md): the
    reference code runs once per task content in a fresh sandbox (episodes/regions.py), and what it measured
    is kept on disk for later runs (episodes/reference_store.py).

    Skipped for an episode an infrastructure failure ended, for a task whose reference runs no code,
    and for sandboxes other than ``local``, the one whose worker tracks regions (an E2B sandbox would
    be started and paid for nothing); a sandbox that cannot run the reference leaves the turns
    unmeasured (logged), never the task failed: the metric is an addition, the episode and its grade
    stand without it.
    """
    if config.sandbox != "local" or is_infrastructure(episode.ended) or not has_reference_code(task):
        return
    try:
        reference = resources.reference_regions.get(task, config.sandbox, resources.open_sandbox,
                                                    config.episode.code_timeout_s)
    except SandboxError as exc:
        _log.warning("task %s: the reference trajectory's crops were not measured: %s", task.id, exc)
        return
    if resources.artifacts is not None:
        locate_untracked(task, episode, resources.artifacts)
    score_regions(episode, reference)


def prepare_run_dir(out: Path, records: PlanRecords, *, resume: bool) -> list[TaskResult]:
    """Create or reopen ``out`` for a run of ``records`` (its config and its resolved model and judge,
    :mod:`vtb_agents.runner.plan`; :func:`vtb_agents.rundir.create.prepare_run_dir`): a resume may
    change only the pacing settings."""
    run_id = new_run_id()
    record = RunRecord(config=records.config, vtb_agents=__version__, model=records.model_record(),
                       judge=records.judge_record(), started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       run_id=run_id, grading_id=run_id)
    return create_run_dir(out, record, resume=resume, may_change=PACING_KEYS)


def run_suite(tasks: Sequence[Task], run: RunConfig | RunPlan, out: Path, *, resume: bool = False,
              progress: ProgressFn | None = None, judge_cache: Path | None = None,
              executor: Executor | None = None, stop: threading.Event | None = None,
              objects: RunObjects = NO_OBJECTS, retry_errors: bool = False, checked: bool = False,
              batch: BatchSettings | None = None, budget: Budget | None = None) -> RunSummary:
    """Run every episode (task and epoch, ``config.epochs`` per task) not yet in ``out``, append each
    result as it finishes, write ``summary.json`` and return it (typed, with ``run_dir`` ``out``).

    ``run`` is the run's plan (:mod:`vtb_agents.runner.plan`), or its config, planned here
    (:func:`~vtb_agents.runner.plan.plan_run`, with ``objects``): the run is resolved once, and
    workers in other processes rebuild its objects from the plan's records.

    ``executor`` spreads the episodes (default: one at a time here); setting ``stop`` finishes the
    running tasks and writes the summary of what is done. ``retry_errors`` (with ``resume``) runs
    again the episodes an infrastructure failure left ungraded, and only those; their new lines
    supersede the old ones (:func:`~vtb_agents.rundir.store.latest_results`). The summary's
    ``complete`` is False while any episode is missing or ungraded by an infrastructure failure.
    Every model, judge and simulated-user request of the run, in every worker, is paced by the plan's
    limiters (:mod:`vtb_agents.models.limiter`), whose counts the summary keeps as ``rate_limits``.
    With ``config.cost_limit`` or ``config.token_limit``, no episode starts once the run's results spent
    it (:mod:`vtb_agents.runner.budget`): the summary of what is done is written, then
    :class:`~vtb_agents.runner.budget.BudgetReached` raised if episodes are left (a ValueError before
    any file when a cost limit meets a model or judge without known prices). ``budget``: a budget
    several runs share instead (``vtb run --model A --model B``, :mod:`vtb_agents.runner.many`).
    ``objects`` from Python (a model, judge, strategy, tools) stand in for the specs of ``config``,
    which records their names.

    Before ``out`` is created or written, every part is built and checked
    (:mod:`vtb_agents.runner.preflight`: the sandbox runs the canary cell): a spec that cannot be
    loaded raises ValueError, a part that fails its check
    :class:`~vtb_agents.runner.preflight.PreflightError`, each naming the part and the cause.
    ``checked``: the caller ran these checks already for this plan (``vtb ablate``, once for all its
    settings). With ``config.judge_batch`` (and a judge with a batch API) verdicts stay pending while
    the episodes run; once all are done the run is graded through the judge provider's batch API
    (:func:`~vtb_agents.runner.regrade.regrade_run`, polling as ``batch`` says).
    """
    out = Path(out)
    tracing = install_tracing_from_env()  # LANGSMITH_TRACING=true: every trace goes through an image-safe client
    ids = [t.id for t in tasks]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise RunError(f"duplicate task ids: {', '.join(duplicates)}")
    executor = executor or LocalExecutor()
    if isinstance(run, RunPlan) and objects:
        raise ValueError("objects from Python belong in the plan (plan_run(config, objects)), not beside it")
    plan = (run if isinstance(run, RunPlan)  # bad specs fail here, before any file
            else plan_run(run, objects, resume_from=out if resume else None))
    config = plan.config
    if plan.in_process_only and not executor.in_process:
        raise RunError("objects from Python (a model, judge, strategy, agent or tools) cannot reach remote workers: "
                       "name them by specs ('provider:model', 'module:function', 'agent:module:function')")
    budget = run_budget(plan.records) if budget is None else budget  # before any file
    cache = judge_cache or out / JUDGE_CACHE_FILE
    if not checked:
        require(check_plan(plan))  # and parts that break their contract or cannot run code
    opening = open_plan(plan, artifacts=out / ARTIFACTS_DIR, checkpoints=out / CHECKPOINT_FILE,
                        judge_cache=cache, run_dir=out)
    out.mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    with run_dir_lock(out, "vtb run"):  # one writer per run directory, for the whole run
        results: list[TaskResult] = []
        total = len(tasks) * config.epochs

        def saved(result: TaskResult) -> None:
            results.append(result)
            budget.spend.add(result)
            if budget.reached:  # no task starts: the running ones finish (runner/budget.py)
                stop.set()
            if progress:
                progress(result, len(results), total)

        store = ResultsStore(out)
        sink = ResultSaver(store, stop, saved)  # a disk error stops the run, loses nothing saved
        try:
            done = prepare_run_dir(out, plan.records, resume=resume)
            results.extend(done)
            budget.spend.add_all(done)
            if budget.reached:
                stop.set()
            finished = {episode_key(r) for r in done if not (retry_errors and r.infrastructure_failed)}
            with opening as resources:  # epoch by epoch: a stopped run has whole epochs first
                todo = [TaskEpoch(t, epoch) for epoch in range(1, config.epochs + 1) for t in tasks
                        if (t.id, epoch) not in finished]
                job = RunJob(sink.guard(lambda item: run_task(item.task, config, resources, epoch=item.epoch)),
                             plan, out, cache)
                executor.run(todo, job, sink, stop)  # workers in other processes open their own resources
        except ModelCacheMiss as miss:  # results written so far stay; a resume continues
            raise RunError(f"{miss}; the run stopped with {sink.saved} new result(s) saved in {out}; resume without "
                           "--model-cache-only to call the model for what the cache lacks") from miss
        except Exception as exc:
            if (cause := storage_cause(exc)) is None:
                raise
            sink.failed(cause)
        failure = sink.finish(out, already=len(results) - sink.saved)
        if failure:
            raise StoppedRun(failure)
        wanted = set(ids)
        results = latest_results(results, source=store.path)  # a retried episode's new result replaces the old one
        kept = [r for r in results if r.task_id in wanted and r.epoch <= config.epochs]
        summary = summarize(kept, judge_name=config.judge, prices=recorded_prices(read_record(out)),  # run.json's
                            expected=len(wanted), epochs=config.epochs,
                            extra={"model": config.model, "strategy": config.strategy_spec,
                                   "critical_rule": config.critical_rule,
                                   "rate_limits": plan.limiters.counts(recorded_pacing(out) if resume else None)})
        typed = write_summary(out, summary)
    if plan.records.defers_verdicts and not typed.missing and not stop.is_set():
        batch = batch or BatchSettings()
        if batch.before is not None:
            batch.before()
        typed = regrade_run(out, tasks=list(tasks), judge_cache=judge_cache,  # the pending verdicts, in batches
                            request_timeout_s=config.request_timeout_s, batch=batch)
    if tracing is not None:
        tracing.flush()
    if (reached := budget.reached) and typed.missing:
        raise BudgetReached(f"{reached}; {len(kept)} of {len(kept) + typed.missing} episode(s) done, the "
                            f"summary of those in {out}; continue with a higher limit")
    return typed.model_copy(update={"run_dir": out})

