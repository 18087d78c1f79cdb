"""SQLite cache of judge verdicts, so that a regrade re-uses what was already judged, and a resumed
run what its killed attempt paid for.

Keyed by a hash of judge model, prompt version and the full prompt (question, golden answer,
criterion, answer), and the epoch from epoch 2 on (``vtb run --epochs``): each epoch of a task is
judged on its own, as an independent run would be, so that an LLM judge's own variation shows in
the intervals; epoch 1 keeps the key a run without epochs has. Only verdicts are cached; errors are
not, so a regrade retries them.

Each verdict is stored with the token usage of the judge call that made it and with who paid for
it (:class:`Payer`): the grading pass (a run with all its resumes, or one ``vtb grade``), the task
and the epoch. A verdict found again by the same pass, task and epoch was paid for by an attempt
whose result was never written (a kill, a full disk): it counts as the judge call it was, with its
usage, and not as a cache hit, so that a resumed run's summary equals an uninterrupted run's
(``judge.calls``, ``judge.cache_hits``, ``usage.judge``; docs/concepts/run-directory.md). Any other verdict found
is a cache hit (``cached``): judged by an earlier run or regrade, paid for there, not here.

A verdict a provider's batch API gave (``vtb grade --batch``, :mod:`vtb_agents.judges.batch`) is stored
like a live one, its usage billed at the batch price (``TokenUsage.batch_*``, docs/how-to/batch-judging.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from vtb_agents.judges.base import Judgement, RubricJudge
from vtb_agents.judges.bounded import ask_judge, judge_time_limit
from vtb_agents.judges.prompt import PROMPT_VERSION, judge_prompt
from vtb_agents.models.cache import PaidHere
from vtb_agents.models.usage import add_usage, measure_usage
from vtb_agents.results import TokenUsage
from vtb_agents.sharedsqlite import SharedSqlite
from vtb_agents.tasks.model import Rubric, Task

_SCHEMA = ["CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, judge TEXT NOT NULL, status TEXT NOT NULL, "
           "justification TEXT NOT NULL)",
           "CREATE TABLE IF NOT EXISTS verdict_payers (key TEXT PRIMARY KEY, usage TEXT NOT NULL, "
           "from_cache TEXT NOT NULL, grading TEXT, task_id TEXT, epoch INTEGER)"]
"""Verdicts, and apart from them (a file written before payers were kept still reads: its verdicts have
none) the usage of the call behind each and who paid for it."""
_GET = ("SELECT status, justification, usage, from_cache, grading, task_id, epoch FROM verdicts "
        "LEFT JOIN verdict_payers USING (key) WHERE key = ?")
_PUT_VERDICT = "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?)"
_PUT_PAYER = "INSERT OR REPLACE INTO verdict_payers VALUES (?, ?, ?, ?, ?, ?)"


@dataclass(frozen=True)
class Payer:
    """Who paid for a verdict: the grading pass (``RunRecord.grading_id``), the task and its epoch."""

    grading: str
    task_id: str
    epoch: int


@dataclass(frozen=True)
class StoredVerdict:
    """A cached verdict: the judgement, the usage of the call that made it (``from_cache``: the part
    the model cache answered; its ``batch_*`` counts: the part billed at the batch price) and who paid
    for it (None: not known, a cache used outside a run)."""

    judgement: Judgement
    usage: TokenUsage
    from_cache: TokenUsage
    payer: Payer | None


class JudgeCache:
    """Verdict store in one SQLite file, shared by threads and processes (:class:`SharedSqlite`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = SharedSqlite(self.path, _SCHEMA)

    @staticmethod
    def key(judge: str, prompt: str, epoch: int = 1) -> str:
        """The cache key of one judge call (of ``epoch``'s episode)."""
        parts: list[object] = [judge, PROMPT_VERSION, prompt] + ([] if epoch == 1 else [epoch])
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def get(self, key: str) -> StoredVerdict | None:
        """The cached verdict for ``key``, if any."""
        row = self._db.one(_GET, (key,))
        if row is None:
            return None
        status, justification, usage, from_cache, grading, task_id, epoch = row
        payer = Payer(grading, task_id, epoch) if grading is not None else None
        return StoredVerdict(Judgement(status, justification), _usage(usage), _usage(from_cache), payer)

    def put(self, key: str, judge: str, judgement: Judgement, usage: TokenUsage | None = None,
            from_cache: TokenUsage | None = None, payer: Payer | None = None) -> None:
        """Store a met / not_met judgement with the usage of its call (a batch API's: billed at the
        batch price, its ``batch_*`` counts) and who paid for it (anything else is ignored)."""
        if judgement.status not in ("met", "not_met"):
            return
        self._db.write_all([
            (_PUT_VERDICT, (key, judge, judgement.status, judgement.justification)),
            (_PUT_PAYER, (key, (usage or TokenUsage()).model_dump_json(),
                          (from_cache or TokenUsage()).model_dump_json(),
                          *((payer.grading, payer.task_id, payer.epoch) if payer else (None, None, None))))])

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _usage(text: str | None) -> TokenUsage:
    """A stored usage (none stored: no tokens)."""
    return TokenUsage.model_validate_json(text) if text else TokenUsage()


def verdict_key(judge: str, task: Task, turn: int, rubric: Rubric, answer: str, epoch: int = 1) -> str:
    """The cache key of the verdict of ``judge`` on ``rubric`` (turn ``turn``, 0-based) of ``task``'s
    episode of ``epoch`` against ``answer``: what the live judge and the batch judge both look up."""
    return JudgeCache.key(judge, judge_prompt(task, turn, rubric, answer), epoch)


class CachedJudge:
    """A judge that asks ``cache`` first and marks the judgements it found there as cached, except
    those the same grading pass (``grading``) paid for the same task and epoch (see the module
    docstring). Without ``grading`` (a cache used outside a run directory) every one found is cached."""

    def __init__(self, judge: RubricJudge, cache: JudgeCache, epoch: int = 1, grading: str | None = None,
                 paid_here: PaidHere | None = None) -> None:
        self.inner, self.cache, self.name, self.calls_model = judge, cache, judge.name, judge.calls_model
        self.epoch, self.grading = epoch, grading
        self._paid_here = paid_here if paid_here is not None else PaidHere()

    def around(self, judge: RubricJudge) -> CachedJudge:
        """The same cache, epoch and grading pass in front of ``judge`` instead (a deferring judge:
        :func:`~vtb_agents.judges.batch.defer_verdicts`)."""
        return CachedJudge(judge, self.cache, self.epoch, self.grading, self._paid_here)

    def for_epoch(self, epoch: int) -> CachedJudge:
        """The same judge and cache, keeping the verdicts of ``epoch`` apart (see the module docstring)."""
        return CachedJudge(self.inner, self.cache, epoch, self.grading, self._paid_here)

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """Cached judgement if present, otherwise the inner judge's (then stored), within the
        judge's own time limit (:meth:`judge_within`)."""
        return self.judge_within(task=task, turn=turn, rubric=rubric, answer=answer, limit_s=judge_time_limit())

    def judge_within(self, *, task: Task, turn: int, rubric: Rubric, answer: str, limit_s: float) -> Judgement:
        """Cached judgement if present, otherwise the inner judge's within ``limit_s``
        (:func:`~vtb_agents.judges.bounded.ask_judge`), stored if it is a verdict.

        Only the inner judge is time-boxed: the cache is read and written here, in the caller's
        thread, so a judge call given up on never stores a verdict later (its retry asks again, as
        a run that never failed would), and the cache's own disk errors propagate (a full disk
        stops the run, ``runner/saving.py``). A verdict is stored with the usage of its call and
        who paid for it (see the module docstring)."""
        key = verdict_key(self.name, task, turn, rubric, answer, self.epoch)
        payer = Payer(self.grading, task.id, self.epoch) if self.grading is not None else None
        hit = self.cache.get(key)
        if hit is not None:
            if payer is not None and hit.payer == payer and self._paid_here.claim(key):
                # this pass paid for it, in an attempt that left no result (or in a batch)
                add_usage(hit.usage, hit.from_cache)
                return hit.judgement
            return replace(hit.judgement, cached=True)
        with measure_usage() as used:  # to store with the verdict; the task's tracker counts the call too
            judgement = ask_judge(self.inner, task=task, turn=turn, rubric=rubric, answer=answer, limit_s=limit_s)
        self._paid_here.claim(key)
        self.cache.put(key, self.name, judgement, used.total, used.from_cache, payer)
        return judgement


def judge_for_epoch(judge: RubricJudge, epoch: int) -> RubricJudge:
    """``judge`` for the episode of ``epoch``: a cached judge keeps each epoch's verdicts apart; any
    other judge is the same for every epoch."""
    return judge.for_epoch(epoch) if isinstance(judge, CachedJudge) else judge
