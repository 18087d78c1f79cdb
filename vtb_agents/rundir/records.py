"""Typed records of a run directory: ``run.json`` (:class:`RunRecord`) and ``summary.json``
(:class:`RunSummary`); a result line is a :class:`~vtb_agents.results.TaskResult`.

The records allow extra fields, so that files written by newer versions still read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vtb_agents.config import RunConfig
from vtb_agents.results import TaskResult

__all__ = ["GroupScore", "RunRecord", "RunSummary", "TaskResult"]


class RunRecord(BaseModel):
    """``run.json``: what was run and how (the run's :class:`~vtb_agents.config.RunConfig`), by which
    version, when, and the resolved settings of its model and judge (presets expanded)."""

    model_config = ConfigDict(extra="allow")
    config: RunConfig
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
    tool_metrics: dict[str, Any] = Field(default_factory=dict)
    judge: dict[str, Any] = Field(default_factory=dict)
    run_dir: Path | None = None
