"""Typed records of a run directory: ``run.json`` (:class:`RunRecord`) and ``summary.json``
(:class:`RunSummary`); a result line is a :class:`~vtb_agents.results.TaskResult`.

Every reader of a run gets these records (:mod:`vtb_agents.rundir.read`): attributes, not dict
look-ups, so that a misspelt or missing field is a type error, not a silent ``None``.

``run.json`` carries its format version (``format_version``, :data:`RUN_FORMAT`): the reader refuses a
file of another version before it reads anything else (:func:`~vtb_agents.rundir.errors.check_format`).
A change to what ``run.json`` holds raises :data:`RUN_FORMAT`; there is no upgrade of older files.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vtb_agents.config import RunConfig, complete_record
from vtb_agents.results import TaskResult, TokenUsage

__all__ = ["RUN_FORMAT", "EpisodeCounts", "GroupScore", "InfrastructureErrors", "JudgeCounts", "ModelRecord",
           "RegionIoU", "RegionScore", "RunCost", "RunRecord", "RunSummary", "RunUsage", "TaskResult", "ToolMetrics",
           "Uncertainty"]


RUN_FORMAT = 2
"""The format version of ``run.json`` that this vtb writes and reads (its ``format_version``; 2: the
model and judge records carry their ``prices``)."""


class ModelRecord(BaseModel):
    """A model or judge of ``run.json`` as resolved: its spec, the preset it came from, its settings,
    and its ``prices`` as the run plan looked them up at the run's start (USD per million tokens and the
    ``batch`` share, the known ones by name, as :meth:`vtb_agents.models.presets.Prices.known` gives
    them; None: unknown, or no model). Every reader prices the run's tokens at these, never at the
    presets of the version that reads it (docs/how-to/cost-and-rate-limits.md)."""

    model_config = ConfigDict(extra="allow")
    spec: str
    preset: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    prices: dict[str, float] | None


class RunRecord(BaseModel):
    """``run.json``: what was run and how (the run's :class:`~vtb_agents.config.RunConfig`), by which
    version, when, and the resolved settings of its model and judge (presets expanded).

    ``run_id`` names the run (drawn when it is created, kept by its resumes) and ``grading_id`` the
    grading pass whose verdicts the results hold (the run's own id at first; each ``vtb grade``
    records the next, :func:`next_grading_id`). The model-call cache and the verdict cache store them
    with each response and verdict paid for, so that a resume counts what its killed attempt paid
    for as the calls they were, not as cache hits (:mod:`vtb_agents.models.cache`,
    :mod:`vtb_agents.judges.cache`); None in a run written before them (what it finds again counts
    as cache hits)."""

    model_config = ConfigDict(extra="allow")
    format_version: int = RUN_FORMAT
    """The format of this file (:data:`RUN_FORMAT` when this vtb wrote it)."""
    config: RunConfig
    vtb_agents: str | None = None
    model: ModelRecord | None = None
    judge: ModelRecord | None = None
    started_at: str | None = None
    run_id: str | None = None
    grading_id: str | None = None

    @field_validator("config", mode="before")
    @classmethod
    def _every_setting(cls, config: Any) -> Any:
        """A recorded config states every setting (a missing one is an error, not its default)."""
        return complete_record(config)


def new_run_id() -> str:
    """A fresh run id (a new run's, also its first grading pass's)."""
    return uuid.uuid4().hex


def next_grading_id(previous: str | None) -> str:
    """The grading-pass id of a regrade of a run graded by pass ``previous``: derived from it, so that
    a regrade killed before it recorded its pass and run again is the same pass (what the killed one
    paid for counts as its calls), while the regrade after a finished one is a new pass. A run that
    recorded no pass (written before them) gets a fresh one."""
    if previous is None:
        return new_run_id()
    return hashlib.sha256(f"{previous}/regrade".encode()).hexdigest()[:32]


class Uncertainty(BaseModel):
    """Standard errors and 95% intervals of APR and ARS (clustered by task), and with epochs pass@k
    and pass^k (:mod:`vtb_agents.analysis.uncertainty`); None where not defined (fewer than two
    tasks; pass@k at one epoch)."""

    apr_stderr: float | None = None
    apr_ci95: list[float] | None = None
    ars_stderr: float | None = None
    ars_ci95: list[float] | None = None
    pass_at_k: float | None = None
    pass_hat_k: float | None = None


class GroupScore(Uncertainty):
    """APR and ARS of one group of tasks (a category, a domain, a turn case), with their intervals.
    ``n`` counts tasks, ``graded`` those with a graded epoch."""

    model_config = ConfigDict(extra="allow")
    n: int
    graded: int
    apr: float | None
    ars: float | None


class InfrastructureErrors(BaseModel):
    """The episodes an infrastructure failure left ungraded (until ``--retry-errors``): how many, and
    their tasks' ids."""

    count: int = 0
    task_ids: list[str] = Field(default_factory=list)


class ToolMetrics(BaseModel):
    """The paper's tool-use metrics (:func:`vtb_agents.analysis.metrics.tool_metrics`)."""

    model_config = ConfigDict(extra="allow")
    proactivity: float | None = None
    success_rate: float | None = None
    volume: float | None = None
    calls: int = 0
    by_tool: dict[str, int] = Field(default_factory=dict)
    image_ops: dict[str, int] = Field(default_factory=dict)
    strategy_image_ops: dict[str, int] = Field(default_factory=dict)
    """Images the strategy's own steps made, by operation (``crop``, ``mark``): not tool calls."""


class RegionScore(BaseModel):
    """Looked at the right place over a group of turns (:func:`vtb_agents.analysis.regions.region_iou`):
    turns measured, the share with ``best_crop_iou >= 0.5``, and the turn pass rate of each side."""

    model_config = ConfigDict(extra="allow")
    turns: int = 0
    share_iou_ge_0_5: float | None = None
    pass_rate_when_looked: float | None = None
    pass_rate_when_not: float | None = None
    not_located: int = 0


class RegionIoU(RegionScore):
    """``summary.json``'s ``region_iou``: the figures over all measured turns, and per category."""

    by_category: dict[str, RegionScore] = Field(default_factory=dict)


class JudgeCounts(BaseModel):
    """How a run's rubrics were decided (:func:`vtb_agents.analysis.metrics.judge_counts`)."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    calls: int = 0
    checks: int = 0
    unjudged: int = 0
    errors: int = 0
    cache_hits: int = 0
    pending: int = 0
    """Verdicts a ``vtb run --judge-batch`` left for its batch grading (docs/how-to/batch-judging.md)."""


class RateLimitCounts(BaseModel):
    """How the run's limiters paced its requests (:meth:`vtb_agents.models.limiter.Limiters.summary`): 429s
    answered (``rejected_429``) and waited out and sent again (``absorbed_429``, never an outcome), seconds
    requests spent waiting for their budget (``wait_s``), in all and per account budget that held a request
    back (``keys``).
    A resumed run adds its counts to those of the summary it continues (a run killed before writing one
    is not counted)."""

    model_config = ConfigDict(extra="allow")
    rejected_429: int = 0
    absorbed_429: int = 0
    wait_s: float = 0.0
    keys: dict[str, dict[str, Any]] = Field(default_factory=dict)


class EpisodeCounts(BaseModel):
    """How many episodes errored or stopped early, and turns stopped at the tool-round cap."""

    model_config = ConfigDict(extra="allow")
    errors: int = 0
    task_timeout: int = 0
    context_exceeded: int = 0
    tool_round_cap: int = 0


class RunUsage(BaseModel):
    """Tokens of the model and of the judge over a run, how many results had no usage, and how many
    calls the model cache answered (``cache_hits``; their tokens are counted as originally reported),
    of the model's and the judge's apart (``model_from_cache``, ``judge_from_cache``); the part billed at
    the batch price is in each usage's ``batch_*`` counts."""

    model_config = ConfigDict(extra="allow")
    model: TokenUsage = Field(default_factory=TokenUsage)
    judge: TokenUsage = Field(default_factory=TokenUsage)
    tasks_without_usage: int = 0
    cache_hits: int = 0
    model_from_cache: TokenUsage = Field(default_factory=TokenUsage)
    judge_from_cache: TokenUsage = Field(default_factory=TokenUsage)


class RunCost(BaseModel):
    """Estimated cost of a run in ``currency`` (USD); None where unknown, never a guessed 0."""

    model_config = ConfigDict(extra="allow")
    currency: str = "USD"
    model: float | None = None
    judge: float | None = None
    total: float | None = None
    per_passed_task: float | None = None
    prices: dict[str, Any] = Field(default_factory=dict)


class PromptCacheSide(BaseModel):
    """The provider's prompt cache on one side (model or judge) of a run, over the calls made in it:
    input tokens, those read from the cache and written to it, the share read (0..1) and the USD it
    saved (docs/concepts/prompt-caching.md); None where unknown."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    share: float | None = None
    saving: float | None = None


class PromptCache(BaseModel):
    """``prompt_cache`` of ``summary.json``: the model's and the judge's, and of both together the share
    of the input served from the cache and the USD saved."""

    model: PromptCacheSide = Field(default_factory=PromptCacheSide)
    judge: PromptCacheSide = Field(default_factory=PromptCacheSide)
    share: float | None = None
    saving: float | None = None


class RunSummary(Uncertainty):
    """A run's ``summary.json`` as a typed object, with the run directory it came from."""

    model_config = ConfigDict(extra="allow")
    tasks: int
    graded: int
    apr: float | None
    ars: float | None
    epochs: int = 1
    ungraded: int = 0
    complete: bool = True
    missing: int = 0
    infrastructure_errors: InfrastructureErrors = Field(default_factory=InfrastructureErrors)
    outcomes: dict[str, int] = Field(default_factory=dict)
    by_category: dict[str, GroupScore] = Field(default_factory=dict)
    by_domain: dict[str, GroupScore] = Field(default_factory=dict)
    by_turncase: dict[str, GroupScore] = Field(default_factory=dict)
    tool_metrics: ToolMetrics = Field(default_factory=ToolMetrics)
    region_iou: RegionIoU = Field(default_factory=RegionIoU)
    judge: JudgeCounts = Field(default_factory=JudgeCounts)
    rate_limits: RateLimitCounts = Field(default_factory=RateLimitCounts)
    critical_disagreements: int = 0
    episodes: EpisodeCounts = Field(default_factory=EpisodeCounts)
    usage: RunUsage = Field(default_factory=RunUsage)
    prompt_cache: PromptCache = Field(default_factory=PromptCache)
    cost: RunCost = Field(default_factory=RunCost)
    model: str | None = None
    strategy: str | None = None
    critical_rule: str | None = None
    run_dir: Path | None = None
