"""Judge a run's pending verdicts through the judge provider's batch API, before ``vtb grade --batch``
grades (docs/how-to/batch-judging.md).

:func:`judge_in_batches` takes the verdicts the grading would ask the judge for and the verdict cache
cannot answer (:func:`~vtb_agents.judges.batch.pending_verdicts`), submits those no earlier attempt
submitted in batches of :data:`~vtb_agents.judges.batch.BATCH_SIZE`, and records each batch in the run
directory (``judge_batches.json``, written atomically) as soon as the provider accepted it, before any
batch is polled. It then polls every batch holding a pending verdict until all have ended, telling
``on_progress`` how far they are, and stores each verdict a batch gave in the verdict cache as a live
judge call would be stored, paid for by this grading pass, its usage marked as billed at the batch
price (``batch``). The grading that follows (:func:`~vtb_agents.runner.regrade.regrade_run`) finds them
there as calls of its own; a request that failed or expired in its batch is asked live then, and a live
call that fails too is a ``judge_error`` (infrastructure, exit 3), never "not met".

A ``vtb grade --batch`` killed at any point and run again resumes: the ledger names the batches already
submitted, so their verdicts are polled, never submitted twice. (Only a kill between the provider
accepting a batch and the ledger being written, a few milliseconds, would lose that batch's id.) The
ledger is removed once the grading that used it has written its results.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from vtb_agents.judges import JudgeChoice
from vtb_agents.judges.base import RubricJudge
from vtb_agents.judges.batch import (BATCH_SIZE, BatchJudge, BatchLedger, PendingVerdict, SubmittedBatch, batch_api,
                                     no_batch_api, pending_verdicts)
from vtb_agents.judges.batch_api import BatchApi, BatchProgress
from vtb_agents.judges.cache import CachedJudge, JudgeCache, Payer
from vtb_agents.judges.relay import Relay
from vtb_agents.config import CriticalRule
from vtb_agents.results import Episode, TaskResult
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.layout import JUDGE_BATCHES_FILE
from vtb_agents.rundir.store import write_json_atomic
from vtb_agents.tasks.model import Task

DEFAULT_POLL_S = 30.0
"""Seconds between two polls of a batch's status."""

ProgressLine = Callable[[str], None]


@dataclass(frozen=True)
class BatchSettings:
    """How ``vtb grade --batch`` polls: every ``poll_s`` seconds, each time telling ``on_progress``;
    ``before`` is called when a ``vtb run --judge-batch`` has run its episodes and starts grading them
    in batches (the CLI writes the report then, with the verdicts pending)."""

    poll_s: float = DEFAULT_POLL_S
    on_progress: ProgressLine | None = None
    before: Callable[[], object] | None = None


@dataclass(frozen=True)
class BatchOutcome:
    """What the batch step did: verdicts pending, submitted now, answered by a batch, left to the live judge."""

    pending: int
    submitted: int
    answered: int
    failed: int


def read_ledger(run_dir: Path, judge: str) -> BatchLedger:
    """The run's batch ledger (a new one for ``judge`` if it has none); RunError if it cannot be read."""
    path = Path(run_dir) / JUDGE_BATCHES_FILE
    if not path.exists():
        return BatchLedger(judge=judge)
    try:
        return BatchLedger.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise RunError(f"{path}: not a batch ledger ({where}: {first['msg']}; {exc.error_count()} error(s)); "
                       "it names batches already submitted: fix or remove it (removing it submits their verdicts "
                       "again)") from exc


def write_ledger(run_dir: Path, ledger: BatchLedger) -> None:
    """Write the run's batch ledger atomically (a crash leaves the old one whole)."""
    write_json_atomic(Path(run_dir) / JUDGE_BATCHES_FILE, ledger.model_dump(mode="json"))


def drop_ledger(run_dir: Path) -> None:
    """Remove the run's batch ledger: the grading that used it has written its results."""
    (Path(run_dir) / JUDGE_BATCHES_FILE).unlink(missing_ok=True)


def progress_line(states: list[BatchProgress], started: float) -> str:
    """One line saying how far ``states`` are: batches ended, requests done and failed, time waited."""
    ended = sum(s.ended for s in states)
    done, failed, total = (sum(s.done for s in states), sum(s.failed for s in states), sum(s.total for s in states))
    statuses = ", ".join(sorted({s.status for s in states}))
    waited = int(time.monotonic() - started)
    return (f"batch judging: {ended} of {len(states)} batch(es) ended ({statuses}); {done} of {total} request(s) "
            f"done, {failed} failed; waited {waited // 60}:{waited % 60:02d}")


def judge_run_in_batches(run_dir: Path, choice: JudgeChoice, judge: RubricJudge, results: list[TaskResult],
                         tasks: dict[str, Task], grading: str, *, critical_rule: CriticalRule,
                         request_timeout_s: float, settings: BatchSettings) -> BatchOutcome | None:
    """:func:`judge_in_batches` for the episodes of ``results`` when ``judge`` (built from ``choice``,
    behind the verdict cache) has a batch API (the plan's ``choice.batch_provider``); else one line
    saying so, and None (the grading asks live)."""
    provider = choice.batch_provider
    if provider is None or not isinstance(judge, CachedJudge):
        if settings.on_progress:
            settings.on_progress(no_batch_api(choice.spec))
        return None
    episodes = [(tasks[result.task_id], result.episode, result.epoch) for result in results]
    return judge_in_batches(run_dir, choice, batch_api(provider), episodes, judge.cache, grading,
                            critical_rule=critical_rule, request_timeout_s=request_timeout_s,
                            poll_s=settings.poll_s, on_progress=settings.on_progress)


def judge_in_batches(run_dir: Path, choice: JudgeChoice, api: BatchApi, episodes: list[tuple[Task, Episode, int]],
                     cache: JudgeCache, grading: str, *, critical_rule: CriticalRule = "weight",
                     request_timeout_s: float, poll_s: float = DEFAULT_POLL_S,
                     on_progress: ProgressLine | None = None) -> BatchOutcome:
    """Judge the pending verdicts of ``episodes`` (task, episode, epoch) with the judge of ``choice``
    through ``api`` into ``cache``, paid for by grading pass ``grading`` (see the module docstring)."""
    spec = choice.spec
    say = on_progress or (lambda line: None)
    pending = pending_verdicts(spec, episodes, cache, critical_rule)
    by_key = {item.key: item for item in pending}
    ledger = read_ledger(run_dir, spec)
    fresh = [item for item in pending if item.key not in ledger.submitted()]
    if not pending:
        say("batch judging: the verdict cache holds every verdict the grading needs: no batch to submit")
    with Relay() as relay:
        judge = BatchJudge(choice, api, relay, request_timeout_s)
        for start in range(0, len(fresh), BATCH_SIZE):
            chunk = fresh[start:start + BATCH_SIZE]
            batch_id = api.submit([judge.request(item) for item in chunk])
            ledger.batches.append(SubmittedBatch(provider=api.provider, batch_id=batch_id,
                                                 keys=[item.key for item in chunk],
                                                 submitted_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            write_ledger(run_dir, ledger)  # before anything is polled: a killed grade resumes from it
            say(f"batch judging: submitted batch {batch_id} of {len(chunk)} verdict request(s) to {api.provider}")
        waiting = [batch for batch in ledger.batches if batch.provider == api.provider
                   and any(key in by_key for key in batch.keys)]
        wait_for(api, [batch.batch_id for batch in waiting], poll_s, say)
        answered = sum(_store(api, judge, batch, by_key, cache, grading) for batch in waiting)
    if pending:
        say(f"batch judging: {answered} of {len(pending)} verdict(s) answered by batches; "
            f"{len(pending) - answered} left to the live judge (failed or expired in their batch)")
    return BatchOutcome(pending=len(pending), submitted=len(fresh), answered=answered, failed=len(pending) - answered)


def wait_for(api: BatchApi, batch_ids: list[str], poll_s: float, say: ProgressLine) -> None:
    """Poll ``batch_ids`` every ``poll_s`` seconds until all have ended, saying how far they are each time."""
    started = time.monotonic()
    while batch_ids:
        states = [api.progress(batch_id) for batch_id in batch_ids]
        say(progress_line(states, started))
        if all(state.ended for state in states):
            return
        time.sleep(poll_s)


def _store(api: BatchApi, judge: BatchJudge, batch: SubmittedBatch, by_key: dict[str, PendingVerdict],
           cache: JudgeCache, grading: str) -> int:
    """Store the verdicts ``batch`` gave for pending verdicts in ``cache``; how many."""
    results = api.results(batch.batch_id)
    stored = 0
    for key in batch.keys:
        item, result = by_key.get(key), results.get(key)
        if item is None or result is None or result.status != "succeeded":
            continue  # not pending any more, or failed in the batch: the grading asks live
        judgement, usage = judge.verdict(item, result)
        if judgement.status in ("met", "not_met"):
            cache.put(key, judge.name, judgement, usage, None, Payer(grading, item.task.id, item.epoch))
            stored += 1
    return stored
