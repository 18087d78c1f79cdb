"""Typed records of a run directory: ``run.json`` (:class:`RunRecord`) and ``summary.json``
(:class:`RunSummary`); a result line is a :class:`~vtb_agents.results.TaskResult`.

The records allow extra fields, so that files written by newer versions still read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vtb_agents.results import TaskResult, TokenUsage

__all__ = ["GroupScore", "RunCost", "RunRecord", "RunSummary", "RunUsage", "TaskResult"]


class RunRecord(BaseModel):
    """``run.json``: what was run and how (the run's ``RunConfig`` as JSON), by which version, when,
    and the resolved settings of its model and judge (presets expanded)."""

    model_config = ConfigDict(extra="allow")
    config: dict[str, Any]
    vtb_agents: str | None = None
    model: dict[str, Any] | None = None
    judge: dict[str, Any] | None = None
    started_at: str | None = None


class GroupScore(BaseModel):
    """APR and ARS of one group of tasks (a category, a domain, a turn case)."""

    model_config = ConfigDict(extra="allow")
    n: int
    graded: int
    apr: float | None
    ars: float | None


class RunUsage(BaseModel):
    """Tokens of the model and of the judge over a run, and how many results had no usage."""

    model_config = ConfigDict(extra="allow")
    model: TokenUsage = Field(default_factory=TokenUsage)
    judge: TokenUsage = Field(default_factory=TokenUsage)
    tasks_without_usage: int = 0


class RunCost(BaseModel):
    """Estimated cost of a run in ``currency`` (USD); None where unknown, never a guessed 0."""

    model_config = ConfigDict(extra="allow")
    currency: str = "USD"
    model: float | None = None
    judge: float | None = None
    total: float | None = None
    per_passed_task: float | None = None
    prices: dict[str, Any] = Field(default_factory=dict)


class RunSummary(BaseModel):
    """A run's ``summary.json`` as a typed object, with the run directory it came from."""

    model_config = ConfigDict(extra="allow")
    tasks: int
    graded: int
    apr: float | None
    ars: float | None
    complete: bool = True
    by_category: dict[str, GroupScore] = Field(default_factory=dict)
    by_domain: dict[str, GroupScore] = Field(default_factory=dict)
    by_turncase: dict[str, GroupScore] = Field(default_factory=dict)
    outcomes: dict[str, int] = Field(default_factory=dict)
    tool_metrics: dict[str, Any] = Field(default_factory=dict)
    judge: dict[str, Any] = Field(default_factory=dict)
    usage: RunUsage = Field(default_factory=RunUsage)
    cost: RunCost = Field(default_factory=RunCost)
    run_dir: Path | None = None
