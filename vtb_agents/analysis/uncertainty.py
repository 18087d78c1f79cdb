"""How sure a run's scores are: tasks as the unit, a task's epochs averaged first (docs/concepts/epochs.md).

A run with ``--epochs K`` has up to K graded episodes per task. A task's pass is the share of its
graded epochs that passed, its score the mean of their scores; APR and ARS are the means of these
task means over the tasks with a graded epoch (at K = 1 exactly the paper's definitions). Epochs of
one task are not independent samples of the benchmark, so the uncertainty is clustered by task:

- ``stderr`` = s / sqrt(n), with s the sample standard deviation (ddof = 1) of the n task means;
- ``ci95`` = mean -/+ t(0.975, n - 1) * stderr, Student's t quantile (``scipy.special.stdtrit``,
  the function behind ``scipy.stats.t.ppf``, which loads in a fraction of the time), not the normal
  1.96: a category of 20 tasks has 19 degrees of freedom, where z would give too narrow an interval.
  The interval is clipped to 0..1, the range a rate can take.

Both are None below two tasks (no spread to measure). An ungraded episode (infrastructure failure)
counts for nothing: neither pass nor fail, and its task's mean is over its other epochs.

With K > 1: ``pass_at_k`` is the share of tasks that passed in at least one of their K epochs and
``pass_hat_k`` the share that passed in all K (pass^k), over the tasks whose K epochs are all graded.
They are the unbiased estimators of pass@k (Chen et al. 2021: 1 - C(n-c, k) / C(n, k)) and pass^k
(Yao et al. 2024: C(c, k) / C(n, k)) for n = k = K samples, with c the passing epochs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Iterable, Sequence

from vtb_agents.results import TaskResult

DIGITS = 6
"""Rates in ``summary.json`` are rounded to this many decimals."""


@dataclass
class TaskEpochs:
    """One task's graded epochs: whether each passed and its score (ungraded epochs are left out)."""

    task_id: str
    episodes: int = 0
    passes: list[bool] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Estimate:
    """A mean over tasks with its standard error and 95% interval (None where not defined)."""

    mean: float | None
    stderr: float | None
    ci95: tuple[float, float] | None


def by_task(results: Iterable[TaskResult]) -> list[TaskEpochs]:
    """The results grouped by task id (in the order first seen), with their graded passes and scores."""
    tasks: dict[str, TaskEpochs] = {}
    for result in results:
        task = tasks.setdefault(result.task_id, TaskEpochs(result.task_id))
        task.episodes += 1
        if result.grade.graded:
            task.passes.append(bool(result.grade.passed))
            if result.grade.score is not None:
                task.scores.append(result.grade.score)
    return list(tasks.values())


def t_quantile(probability: float, df: int) -> float:
    """Student's t quantile: the value a t variable with ``df`` degrees of freedom stays below with
    ``probability`` (``scipy.stats.t.ppf``)."""
    from scipy.special import stdtrit  # loaded when a summary is made, not by `vtb --help`

    return float(stdtrit(df, probability))


def estimate(values: Sequence[float]) -> Estimate:
    """The mean of ``values`` (one per task), its standard error s / sqrt(n) and its 95% interval
    (Student's t, clipped to 0..1), rounded to :data:`DIGITS` decimals."""
    if not values:
        return Estimate(None, None, None)
    mean = fmean(values)
    if len(values) < 2:
        return Estimate(round(mean, DIGITS), None, None)
    import numpy as np

    stderr = float(np.std(values, ddof=1)) / math.sqrt(len(values))
    half = t_quantile(0.975, len(values) - 1) * stderr
    low, high = max(0.0, mean - half), min(1.0, mean + half)
    return Estimate(round(mean, DIGITS), round(stderr, DIGITS), (round(low, DIGITS), round(high, DIGITS)))


def apr_estimate(tasks: Sequence[TaskEpochs]) -> Estimate:
    """APR: the mean over graded tasks of each task's share of passed epochs."""
    return estimate([fmean(1.0 if p else 0.0 for p in t.passes) for t in tasks if t.passes])


def ars_estimate(tasks: Sequence[TaskEpochs]) -> Estimate:
    """ARS: the mean over graded tasks of each task's mean score over its epochs."""
    return estimate([fmean(t.scores) for t in tasks if t.scores])


def pass_at_k(tasks: Sequence[TaskEpochs], k: int) -> tuple[float | None, float | None]:
    """(pass_at_k, pass_hat_k): the shares of tasks passing in at least one / in all of their ``k``
    epochs, over the tasks whose ``k`` epochs are all graded (None if there is none)."""
    complete = [t for t in tasks if len(t.passes) == k]
    if not complete:
        return None, None
    return (round(fmean(1.0 if any(t.passes) else 0.0 for t in complete), DIGITS),
            round(fmean(1.0 if all(t.passes) else 0.0 for t in complete), DIGITS))
