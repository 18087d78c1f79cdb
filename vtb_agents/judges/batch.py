"""Rubric verdicts through a provider's batch API, at half the price (docs/how-to/batch-judging.md).

The pieces the batch flow (:mod:`vtb_agents.runner.batch_grade`) puts together, none of which knows
the run directory:

* :func:`pending_verdicts`: the verdicts a grading would ask the judge for and the verdict cache cannot
  answer, chosen by the grading's own rules (:func:`~vtb_agents.judges.grade.rubric_verdict`);
* :class:`BatchJudge`: the LLM judge of the run's spec behind a :class:`~vtb_agents.judges.relay.Relay`,
  which turns a pending verdict into the exact request the live judge sends (:meth:`BatchJudge.request`)
  and a batch's response into the judgement and usage the live judge would have had
  (:meth:`BatchJudge.verdict`), so cache keys, requests and verdicts are those of live grading;
* :class:`BatchApi`: one provider's batch wire format (:mod:`vtb_agents.judges.batch_openai`,
  :mod:`vtb_agents.judges.batch_anthropic`): submit, progress, results;
* :class:`BatchLedger`: the typed record of the batches submitted for a run, which the flow writes
  into the run directory before it polls any of them;
* :func:`defer_verdicts`: the judge of a ``vtb run --judge-batch`` while its episodes run, which leaves
  every verdict the cache lacks :data:`PENDING` until the run is graded in batches.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from vtb_agents.config import CriticalRule
from vtb_agents.judges import JudgeChoice
from vtb_agents.judges.base import Judgement, RubricJudge
from vtb_agents.judges.batch_api import BatchApi, BatchError, BatchItem, ItemResult
from vtb_agents.judges.cache import CachedJudge, JudgeCache, verdict_key
from vtb_agents.judges.grade import rubric_verdict
from vtb_agents.judges.relay import Relay
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S
from vtb_agents.models.usage import billed_at_batch, measure_usage
from vtb_agents.results import PENDING, Episode, TokenUsage
from vtb_agents.tasks.model import Rubric, Task

BATCH_SIZE = 2000
"""Verdict requests per submitted batch. A judge request is a few kB of text, so a batch stays far below
both providers' limits (OpenAI: 50,000 requests and 200 MB per file; Anthropic: 100,000 requests and
256 MB), and a full VisualToolBench run (7,777 verdicts) goes in four batches that the provider may
process side by side."""

BATCH_APIS = {"openai": "vtb_agents.judges.batch_openai:OpenAIBatches",
              "anthropic": "vtb_agents.judges.batch_anthropic:AnthropicBatches"}
"""Providers whose batch API the judge can use, and the class that speaks it (loaded when used)."""
BATCH_PROVIDERS = tuple(BATCH_APIS)


@dataclass(frozen=True)
class PendingVerdict:
    """A verdict the judge must give: rubric ``rubric`` of turn ``turn`` (0-based) of ``task``'s episode
    of ``epoch`` against ``answer``, under cache key ``key``."""

    key: str
    task: Task
    turn: int
    rubric: Rubric
    answer: str
    epoch: int


class SubmittedBatch(BaseModel):
    """One batch submitted for a run: provider, id, the cache keys of its requests, when."""

    provider: str
    batch_id: str
    keys: list[str]
    submitted_at: str


class BatchLedger(BaseModel):
    """The batches submitted for a run's grading (``judge_batches.json``), kept until the grading ends:
    a grade killed while it polls resumes polling them and submits none of their verdicts again."""

    judge: str
    batches: list[SubmittedBatch] = Field(default_factory=list)

    def submitted(self) -> set[str]:
        """The cache keys of every request submitted."""
        return {key for batch in self.batches for key in batch.keys}


def batch_provider(choice: JudgeChoice) -> str | None:
    """The provider of the classified judge ``choice`` if the batch judge can serve it (an LLM judge
    of a provider in :data:`BATCH_PROVIDERS`), else None (``rule``, your own judge, another provider).
    The run plan asks it once (:mod:`vtb_agents.runner.plan`); everything else reads
    :attr:`JudgeChoice.batch_provider <vtb_agents.judges.JudgeChoice>`."""
    if choice.kind != "model":
        return None
    provider = choice.model.spec.partition(":")[0]
    return provider if provider in BATCH_PROVIDERS else None


def no_batch_api(spec: str) -> str:
    """The one line saying judge ``spec`` has no batch API, so its verdicts are asked live."""
    return (f"judge {spec} has no batch API (only LLM judges of {' and '.join(BATCH_PROVIDERS)} have one): "
            "its verdicts are asked live")


def batch_api(provider: str) -> BatchApi:
    """The batch API client of ``provider`` (one of :data:`BATCH_PROVIDERS`), configured from the
    environment as the provider's SDK is (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, API keys)."""
    if provider not in BATCH_APIS:
        raise BatchError(f"provider {provider!r} has no batch API here (only {', '.join(BATCH_PROVIDERS)})")
    module, _, name = BATCH_APIS[provider].partition(":")
    api: BatchApi = getattr(importlib.import_module(module), name)()
    return api


@dataclass
class _Asked:
    """A judge that records what it is asked (under the verdict's cache key) and decides nothing."""

    name: str
    epoch: int
    asked: list[PendingVerdict] = field(default_factory=list)
    calls_model: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        key = verdict_key(self.name, task, turn, rubric, answer, self.epoch)
        with self.lock:
            self.asked.append(PendingVerdict(key, task, turn, rubric, answer, self.epoch))
        return Judgement("error", "pending: asked in a batch")


def pending_verdicts(judge: str, episodes: list[tuple[Task, Episode, int]], cache: JudgeCache,
                     critical_rule: CriticalRule = "weight") -> list[PendingVerdict]:
    """The verdicts that grading ``episodes`` (task, episode, epoch) would ask judge ``judge`` for and
    ``cache`` cannot answer, each once, in grading order: the rubrics with neither a check nor an
    episode that decides them (the rules of :func:`~vtb_agents.judges.grade.rubric_verdict`)."""
    pending: dict[str, PendingVerdict] = {}
    for task, episode, epoch in episodes:
        asked = _Asked(judge, epoch)
        for turn, rubric in task.rubrics:
            rubric_verdict(task, episode, asked, turn, rubric, critical_rule)
        for item in asked.asked:
            if item.key not in pending and cache.get(item.key) is None:
                pending[item.key] = item
    return list(pending.values())


class BatchJudge:
    """The LLM judge of ``choice`` (classified by the run plan) talking to ``relay``: the live judge's
    requests and parsing, for a batch."""

    def __init__(self, choice: JudgeChoice, api: BatchApi, relay: Relay,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        from vtb_agents.judges import llm_judge

        self.name, self.relay = choice.spec, relay
        self._judge = llm_judge(choice, request_timeout_s, base_url=api.relay_base_url(relay.url), attempts=1)

    def _ask(self, item: PendingVerdict) -> Judgement:
        """The judge's judgement of ``item`` through the relay, untraced (a captured request is no judge call)."""
        from langsmith import tracing_context

        with tracing_context(enabled=False):
            return self._judge.judge(task=item.task, turn=item.turn, rubric=item.rubric, answer=item.answer)

    def request(self, item: PendingVerdict) -> BatchItem:
        """The request the live judge sends for ``item``, as a batch line."""
        captured = self.relay.capture(lambda: self._ask(item))
        if captured is None:
            raise BatchError(f"judge {self.name!r} sent no request for task {item.task.id} turn {item.turn + 1} "
                             f"rubric {item.rubric.id}")
        return BatchItem(item.key, captured.path, captured.body)

    def verdict(self, item: PendingVerdict, result: ItemResult) -> tuple[Judgement, TokenUsage]:
        """The judgement and usage the live judge gets from ``result``'s response (an ``error`` judgement
        when the response is no verdict: the grading then asks live), the usage billed at the batch price
        (:func:`~vtb_agents.models.usage.billed_at_batch`)."""
        if result.status != "succeeded" or result.body is None:
            return Judgement("error", f"batch request {result.status}: {result.error}"), TokenUsage()
        body = dict(result.body)
        with measure_usage() as used:
            judgement = self.relay.answer(lambda: self._ask(item), 200, body)
        return judgement, billed_at_batch(used.total)


class _Deferred:
    """A judge that decides nothing yet: every verdict it is asked for is :data:`PENDING` (no model is
    asked, so none counts as a judge call)."""

    calls_model = False

    def __init__(self, name: str) -> None:
        self.name = name

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """The pending verdict."""
        return Judgement("error", PENDING)


def defer_verdicts(judge: RubricJudge) -> RubricJudge:
    """``judge`` with its verdicts deferred: the verdict cache (if ``judge`` has one) still answers
    what it holds; every other verdict is :data:`PENDING` (``vtb run --judge-batch``)."""
    if isinstance(judge, CachedJudge):
        return judge.around(_Deferred(judge.name))
    return _Deferred(judge.name)
