"""The paper's difficulty filter: keep a task when at least ``min_fail`` of the given runs failed it.

VisualToolBench kept a task only if at least two of three strong models failed it in pre-grading.
Here each run is one model's run of the same suite. A task's outcome in a run is ``pass``, ``fail``
(graded, not passed), ``ungraded`` (an infrastructure failure or an unjudged critical rubric) or
``missing`` (the run has no result for it). Only ``fail`` counts: ungraded and missing outcomes are
never guessed. A task that falls short of ``min_fail`` only because of them is ``undecided``: it is
reported, and not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

from vtb_agents.results import TaskResult
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.read import FinishedRun, open_finished_run
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import source_key

Outcome = Literal["pass", "fail", "ungraded", "missing"]
Decision = Literal["keep", "drop", "undecided"]


def outcome_of(result: TaskResult | None) -> Outcome:
    """A task's outcome in one run (None: the run has no result for it)."""
    if result is None:
        return "missing"
    if not result.grade.graded or result.grade.passed is None:
        return "ungraded"
    return "pass" if result.grade.passed else "fail"


@dataclass(frozen=True)
class FilterRow:
    """One task: its outcome in each run (in the order of the runs) and the decision."""

    task_id: str
    outcomes: tuple[Outcome, ...]
    decision: Decision

    @property
    def fails(self) -> int:
        """How many runs failed the task."""
        return self.outcomes.count("fail")


@dataclass
class DifficultyReport:
    """The per-task outcome table of a filter and what it keeps."""

    runs: list[str]
    min_fail: int
    rows: list[FilterRow]

    @property
    def kept(self) -> list[str]:
        """Ids of the tasks kept, in task-source order."""
        return [row.task_id for row in self.rows if row.decision == "keep"]

    def count(self, decision: Decision) -> int:
        """How many tasks got ``decision``."""
        return sum(row.decision == decision for row in self.rows)


def decide(outcomes: Sequence[Outcome], min_fail: int) -> Decision:
    """Keep at ``min_fail`` failures; undecided when missing or ungraded runs could still reach it."""
    fails = list(outcomes).count("fail")
    unknown = sum(o in ("missing", "ungraded") for o in outcomes)
    if fails >= min_fail:
        return "keep"
    return "undecided" if fails + unknown >= min_fail else "drop"


def difficulty_filter(runs: Sequence[FinishedRun], tasks: Sequence[Task], min_fail: int) -> DifficultyReport:
    """Decide every task of ``tasks`` (the suite the runs ran) from the runs' results."""
    if min_fail < 1 or min_fail > len(runs):
        raise ValueError(f"--min-fail must be between 1 and the number of runs ({len(runs)}), not {min_fail}")
    known = {t.id for t in tasks}
    by_run = []
    for run in runs:
        results = {r.task_id: r for r in run.results}
        stray = sorted(set(results) - known)
        if stray:
            raise RunError(f"{run.path}: task id(s) not in the task source: {', '.join(stray[:10])}")
        by_run.append(results)
    rows = []
    for task in tasks:
        outcomes = tuple(outcome_of(results.get(task.id)) for results in by_run)
        rows.append(FilterRow(task.id, outcomes, decide(outcomes, min_fail)))
    return DifficultyReport(runs=[str(run.path) for run in runs], min_fail=min_fail, rows=rows)


def open_runs(run_dirs: Sequence[Path | str]) -> list[FinishedRun]:
    """The finished runs to filter by (a :class:`RunError` names a directory that is not one)."""
    if not run_dirs:
        raise RunError("give at least one run directory (--runs)")
    return [open_finished_run(path).single_epoch("the difficulty filter") for path in run_dirs]


def shared_task_source(runs: Sequence[FinishedRun]) -> str:
    """The one task source every run used, however each spelled it (``ho_tasks``, ``./ho_tasks``: see
    :func:`~vtb_agents.tasks.sources.source_key`); an error when they differ: give --tasks then."""
    sources = [run.run.config.tasks for run in runs]
    if len({source_key(source) for source in sources}) != 1:
        raise RunError(f"the runs used different task sources ({', '.join(sorted(set(sources)))}): give --tasks")
    return sources[0]
