"""Regrade a finished run, without calling the agent model: with its own judge and critical rule
(``run.json``) unless others are given.

Episodes are re-used as they are; verdicts come from the judge cache where present, and judge
calls that failed before are asked again (failures are never cached). A regrade is a grading pass
of its own (``RunRecord.grading_id``): verdicts the run or an earlier regrade paid for are cache hits,
those a killed attempt of this same regrade paid for count as its calls. The run's
``results.jsonl`` is rewritten atomically (a crash leaves the old file whole) and ``run.json``
records the new judge, so that a later ``--resume`` continues with it. Each task's transcript
gets the new verdicts in place of the old (its episode events stay). With ``batch`` the pending
verdicts first go through the judge provider's batch API (:mod:`vtb_agents.runner.batch_grade`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from vtb_agents.analysis.cost import recorded_prices
from vtb_agents.analysis.metrics import summarize
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.episodes.recorder import TranscriptRecorder
from vtb_agents.config import CriticalRule
from vtb_agents.judges.cache import judge_for_epoch
from vtb_agents.judges.bounded import judge_time_limit
from vtb_agents.judges.graph import grade_episode
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S
from vtb_agents.models.usage import track_usage
from vtb_agents.results import TaskResult, task_outcome
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.layout import JUDGE_CACHE_FILE, RUN_FILE, artifacts_dir
from vtb_agents.rundir.lock import run_dir_lock
from vtb_agents.rundir.create import write_summary
from vtb_agents.rundir.read import open_finished_run, read_record, recorded_pacing
from vtb_agents.rundir.records import RateLimitCounts, RunSummary, next_grading_id
from vtb_agents.config import RunConfig
from vtb_agents.rundir.settings import with_grading
from vtb_agents.rundir.store import ResultsStore, write_json_atomic
from vtb_agents.rundir.transcripts import regraded_transcript
from vtb_agents.runner.batch_grade import BatchSettings, drop_ledger, judge_run_in_batches
from vtb_agents.runner.plan import plan_judge
from vtb_agents.runner.resources import open_judge
from vtb_agents.tasks.model import Task
from vtb_agents.transcript import JudgeEvent


@dataclass(frozen=True)
class Grading:
    """How a run is graded: its judge spec and critical rule, over ``epochs`` episodes per task."""

    judge: str
    critical_rule: CriticalRule
    epochs: int = 1


def _grading(settings: RunConfig) -> Grading:
    return Grading(judge=settings.judge, critical_rule=settings.critical_rule, epochs=settings.epochs)


def recorded_grading(run_dir: Path | str) -> Grading:
    """The judge and critical rule ``run_dir``'s ``run.json`` records (RunError if it has none)."""
    return _grading(read_record(run_dir).config)


def regrade_run(run_dir: Path, judge_spec: str | None = None, *, critical_rule: CriticalRule | None = None,
                tasks: list[Task] | None = None, judge_cache: Path | None = None,
                progress: Callable[[TaskResult, int, int], None] | None = None,
                request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, batch: BatchSettings | None = None
                ) -> RunSummary:
    """Grade every episode of ``run_dir`` again, write new results and summary and return the summary
    (typed, with ``run_dir``); ``judge_spec`` and ``critical_rule`` default to the run's own (a judge
    given here is resolved once, :func:`~vtb_agents.runner.plan.plan_judge`, and recorded as the run's).
    With ``batch``, verdicts the cache lacks are asked in batches first (docs/how-to/batch-judging.md)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: no such run directory")
    with run_dir_lock(run_dir, "vtb grade"):  # nobody appends while the file is read and rewritten
        finished = open_finished_run(run_dir)
        results = finished.results
        recorded = _grading(finished.run.config)
        judge_spec = judge_spec or recorded.judge
        critical_rule = critical_rule or recorded.critical_rule
        by_id = finished.tasks(tasks, needed=[r.task_id for r in results])
        judging = plan_judge(judge_spec, request_timeout_s)
        grading = next_grading_id(finished.run.grading_id)  # a new pass: the run's verdicts are cache hits
        regraded = []
        with open_judge(judging.judge, judge_cache or run_dir / JUDGE_CACHE_FILE, grading) as judge:
            if batch is not None:
                judge_run_in_batches(run_dir, judging.choice, judge, results, by_id, grading,
                                     critical_rule=critical_rule, request_timeout_s=request_timeout_s, settings=batch)
            artifacts = ArtifactStore(artifacts_dir(run_dir))
            for done, result in enumerate(results, start=1):
                recorder = TranscriptRecorder(artifacts)  # the new verdicts replace the transcript's
                with track_usage() as judge_usage:
                    grade = grade_episode(by_id[result.task_id], result.episode, judge_for_epoch(judge, result.epoch),
                                          critical_rule, callbacks=[recorder],
                                          time_limit_s=finished.run.config.episode.task_timeout_s,
                                          call_limit_s=judge_time_limit(request_timeout_s))
                judged = [e for e in recorder.transcript(result.task_id).events if isinstance(e, JudgeEvent)]
                regraded_transcript(run_dir, result.task_id, judged, result.epoch)
                # a result written before usage was recorded keeps none: its model's tokens are unknown
                usage = result.usage.model_copy(update={"judge": judge_usage.total}) if result.usage else None
                regraded.append(result.model_copy(update={"grade": grade, "usage": usage,
                                                          "outcome": task_outcome(result.episode, grade)}))
                if progress:
                    progress(regraded[-1], done, len(results))
        ResultsStore(run_dir).rewrite(regraded)
        drop_ledger(run_dir)  # its batches' verdicts are graded
        record = with_grading(finished.run, judge_spec, critical_rule).model_copy(
            update={"judge": judging.record(), "grading_id": grading})
        write_json_atomic(run_dir / RUN_FILE, record.model_dump(mode="json"))
        pacing = recorded_pacing(run_dir) or RateLimitCounts().model_dump(mode="json")  # the shape every run writes
        summary = summarize(regraded, judge_name=judge_spec, prices=recorded_prices(record),  # the new judge's
                            epochs=finished.run.config.epochs,
                            extra={"model": finished.run.config.model, "strategy": finished.run.config.strategy_spec,
                                   "critical_rule": critical_rule, "rate_limits": pacing})
        return write_summary(run_dir, summary).model_copy(update={"run_dir": run_dir})
