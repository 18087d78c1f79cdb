"""SQLite cache of judge verdicts, so that a regrade re-uses what was already judged.

Keyed by a hash of judge model, prompt version and the full prompt (question, golden answer,
criterion, answer), and the epoch from epoch 2 on (``vtb run --epochs``): each epoch of a task is
judged on its own, as an independent run would be, so that an LLM judge's own variation shows in
the intervals; epoch 1 keeps the key a run without epochs has. Only verdicts are cached; errors are
not, so a regrade retries them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from vtb_agents.judges.base import Judgement, RubricJudge
from vtb_agents.judges.bounded import ask_judge, judge_time_limit
from vtb_agents.judges.prompt import PROMPT_VERSION, judge_prompt
from vtb_agents.sharedsqlite import SharedSqlite
from vtb_agents.tasks.model import Rubric, Task


class JudgeCache:
    """Verdict store in one SQLite file, shared by threads and processes (:class:`SharedSqlite`)."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._db = SharedSqlite(self.path, ["CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, "
                                            "judge TEXT NOT NULL, status TEXT NOT NULL, justification TEXT NOT NULL)"],
                                busy_timeout_s)

    @staticmethod
    def key(judge: str, prompt: str, epoch: int = 1) -> str:
        """The cache key of one judge call (of ``epoch``'s episode)."""
        parts: list[object] = [judge, PROMPT_VERSION, prompt] + ([] if epoch == 1 else [epoch])
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def get(self, key: str) -> Judgement | None:
        """The cached judgement for ``key``, if any."""
        row = self._db.one("SELECT status, justification FROM verdicts WHERE key = ?", (key,))
        return Judgement(row[0], row[1]) if row else None

    def put(self, key: str, judge: str, judgement: Judgement) -> None:
        """Store a met / not_met judgement (anything else is ignored)."""
        if judgement.status not in ("met", "not_met"):
            return
        self._db.write("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?)",
                       (key, judge, judgement.status, judgement.justification))

    def close(self) -> None:
        """Close the database."""
        self._db.close()


class CachedJudge:
    """A judge that asks ``cache`` first and marks the judgements it found there as cached."""

    def __init__(self, judge: RubricJudge, cache: JudgeCache, epoch: int = 1) -> None:
        self.inner, self.cache, self.name, self.calls_model = judge, cache, judge.name, judge.calls_model
        self.epoch = epoch

    def for_epoch(self, epoch: int) -> CachedJudge:
        """The same judge and cache, keeping the verdicts of ``epoch`` apart (see the module docstring)."""
        return CachedJudge(self.inner, self.cache, epoch)

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
        stops the run, ``runner/saving.py``)."""
        key = self.cache.key(self.name, judge_prompt(task, turn, rubric, answer), self.epoch)
        hit = self.cache.get(key)
        if hit is not None:
            return replace(hit, cached=True)
        judgement = ask_judge(self.inner, task=task, turn=turn, rubric=rubric, answer=answer, limit_s=limit_s)
        self.cache.put(key, self.name, judgement)
        return judgement


def judge_for_epoch(judge: RubricJudge, epoch: int) -> RubricJudge:
    """``judge`` for the episode of ``epoch``: a cached judge keeps each epoch's verdicts apart; any
    other judge is the same for every epoch."""
    return judge.for_epoch(epoch) if isinstance(judge, CachedJudge) else judge
