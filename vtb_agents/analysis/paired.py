"""Paired comparison of two runs over the same tasks: per-task flips, the exact McNemar test, paired
bootstrap intervals on the differences in APR and ARS, and the difference in cost
(docs/tutorials/compare-runs.md).

Pure functions over :class:`~vtb_agents.results.TaskResult` lists; ``vtb compare`` (JSON, terminal and
HTML) shows what :func:`compare_pair` returns. Run B is compared with run A: every delta is B minus A,
a flip to pass is a task A failed and B passed.

- **Pairing.** Only tasks graded in both runs are paired. A task in one run only is listed under
  ``only_in_a`` / ``only_in_b``; a task in both runs that one run left ungraded (an infrastructure
  failure, or a critical rubric nobody could judge; DESIGN.md "Two kinds of failure") is listed under
  ``ungraded_a`` / ``ungraded_b`` and counted neither as a pass nor as a fail. With epochs, a task
  is ungraded in a run when any of its epochs is: its pass rate would otherwise rest on other epochs
  than the other run's (``vtb run --resume --retry-errors`` grades it).
- **Epochs.** A task's pass in a run is the mean of its epochs' passes (0..1) for the bootstrap,
  and its strict majority for McNemar and the flips: passed in more than half of its epochs (a tie,
  say 1 of 2, is a fail: a pass has to be the usual result). Its score is the mean of its epochs'.
- **McNemar, exact.** Under "no difference" each discordant task (a flip either way) is a fair coin:
  p is the two-sided binomial test of the flips to pass among all flips at 1/2
  (``scipy.stats.binomtest``), that is ``min(1, 2 * P(X <= min(b, c)))`` for X ~ Bin(b + c, 1/2).
  No discordant task gives p = 1 (no evidence of a difference).
- **Bootstrap.** The unit is the task (its epochs averaged first): :data:`BOOTSTRAP_RESAMPLES`
  resamples of the paired tasks with replacement (``scipy.stats.bootstrap`` with ``paired=True``,
  a NumPy ``Generator`` seeded with :data:`BOOTSTRAP_SEED`, so a comparison repeats exactly), and the
  2.5th and 97.5th percentiles of the resampled mean difference (percentile interval). Fewer than two
  paired tasks give no interval.
- **Pass counts.** With epochs, ``pass_counts_changed`` lists the paired tasks whose share of passing
  epochs changed (3/3 to 2/3 is no flip of the majority, yet a change; 1/1 to 2/2 is none).
- **Where it looked.** Over the turns measured in both runs (same task and turn; each averaged over its
  epochs), B's share with best crop IoU >= 0.5 minus A's (``delta_share_looked``), with a paired
  bootstrap interval over those turns.
- **Cost.** The estimated cost of the paired tasks in each run (:func:`~vtb_agents.analysis.cost.cost_summary`
  at the prices each run recorded), and B's minus A's; unknown (None) when either is.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from statistics import fmean
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field

from vtb_agents.analysis.cost import RunPrices, cost_summary
from vtb_agents.analysis.regions import LOOKED_IOU
from vtb_agents.results import TaskResult

BOOTSTRAP_RESAMPLES = 10_000
"""Resamples of the paired bootstrap: at the suite's 1,204 tasks the interval's ends vary by about 0.03
points (standard deviation) from seed to seed, and each interval takes about 0.4 s."""
BOOTSTRAP_SEED = 0
"""Seed of the bootstrap's ``numpy.random.Generator``: the same runs give the same interval."""
CONFIDENCE = 0.95

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "CONFIDENCE", "PairedComparison", "RunResults",
           "PassCountChange", "TaskTally", "compare_pair", "compare_pairs", "looked_by_turn", "mcnemar_exact_p",
           "paired_bootstrap_ci", "tally_tasks"]


@dataclass(frozen=True)
class TaskTally:
    """One graded task of one run, its epochs pooled: how many there were, how many passed, the mean score."""

    task_id: str
    epochs: int
    passes: int
    score: float

    @property
    def pass_rate(self) -> float:
        """The share of the task's epochs that passed (0..1), the task's pass for the bootstrap."""
        return self.passes / self.epochs

    @property
    def majority_pass(self) -> bool:
        """Passed in more than half of its epochs (a tie is a fail): the task's pass for McNemar."""
        return 2 * self.passes > self.epochs


@dataclass(frozen=True)
class RunTally:
    """A run's tasks by id: the graded ones (:class:`TaskTally`) and the ungraded ids."""

    graded: dict[str, TaskTally]
    ungraded: frozenset[str]

    @property
    def task_ids(self) -> frozenset[str]:
        """Every task id of the run, graded or not."""
        return frozenset(self.graded) | self.ungraded


@dataclass(frozen=True)
class RunResults:
    """What a paired comparison needs of one run: its label, its results (every epoch of every task),
    and the prices it recorded for its tokens (:func:`~vtb_agents.analysis.cost.recorded_prices`)."""

    label: str
    results: Sequence[TaskResult]
    prices: RunPrices


class PassCountChange(BaseModel):
    """A paired task whose passing epochs changed between the runs (``passes_a`` of ``epochs_a`` in A)."""

    task_id: str
    passes_a: int
    epochs_a: int
    passes_b: int
    epochs_b: int


def looked_by_turn(results: Sequence[TaskResult]) -> dict[tuple[str, int], float]:
    """Per (task, turn) measured for where it looked, the share of its epochs that looked (IoU >= 0.5)."""
    seen: dict[tuple[str, int], list[float]] = defaultdict(list)
    for result in results:
        for turn in result.episode.turns:
            if turn.best_crop_iou is not None:
                seen[result.task_id, turn.index].append(1.0 if turn.best_crop_iou >= LOOKED_IOU else 0.0)
    return {key: fmean(values) for key, values in seen.items()}


class PairedComparison(BaseModel):
    """Run ``b`` compared with run ``a`` over the tasks graded in both (``tasks`` of them); the JSON
    object of one pair under ``paired`` in ``vtb compare --json``. Deltas are B minus A; task ids sorted."""

    model_config = ConfigDict(frozen=True)
    a: str
    b: str
    tasks: int = Field(description="Tasks graded in both runs: the paired tasks every figure below is over.")
    only_in_a: list[str]
    only_in_b: list[str]
    ungraded_a: list[str] = Field(description="Tasks of both runs that A left ungraded: not paired.")
    ungraded_b: list[str] = Field(description="Tasks of both runs that B left ungraded: not paired.")
    flips_to_pass: list[str] = Field(description="Failed in A, passed in B (majority over epochs).")
    flips_to_fail: list[str] = Field(description="Passed in A, failed in B (majority over epochs).")
    both_pass: int
    both_fail: int
    mcnemar_p: float | None = Field(description="Exact two-sided McNemar p; None without paired tasks.")
    delta_apr: float | None
    delta_apr_ci: tuple[float, float] | None
    delta_ars: float | None
    delta_ars_ci: tuple[float, float] | None
    pass_counts_changed: list[PassCountChange] = Field(
        default_factory=list, description="With epochs: paired tasks whose share of passing epochs changed.")
    looked_turns: int = Field(0, description="Turns measured for where they looked in both runs (same task, "
                                             "same turn): the turns the difference in share looked is over.")
    delta_share_looked: float | None = Field(
        None, description="B minus A of the share of those turns with best crop IoU >= 0.5 (each task's turn "
                          "averaged over its epochs first); None without such turns.")
    delta_share_looked_ci: tuple[float, float] | None = None
    cost_a: float | None = Field(description="Estimated cost (USD) of the paired tasks in A; None if unknown.")
    cost_b: float | None
    delta_cost: float | None
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES
    bootstrap_seed: int = BOOTSTRAP_SEED
    confidence: float = CONFIDENCE

    @property
    def unpaired(self) -> bool:
        """Whether some task of either run is left out (in one run only, or ungraded)."""
        return bool(self.only_in_a or self.only_in_b or self.ungraded_a or self.ungraded_b)


def tally_tasks(results: Sequence[TaskResult]) -> RunTally:
    """Pool each task's epochs: a task is ungraded if any of its epochs is, else its passes and mean score."""
    by_task: dict[str, list[TaskResult]] = defaultdict(list)
    for result in results:
        by_task[result.task_id].append(result)
    graded: dict[str, TaskTally] = {}
    ungraded: set[str] = set()
    for task_id, epochs in by_task.items():
        grades = [r.grade for r in epochs]
        if not all(g.graded and g.score is not None for g in grades):
            ungraded.add(task_id)
            continue
        graded[task_id] = TaskTally(task_id=task_id, epochs=len(grades), passes=sum(bool(g.passed) for g in grades),
                                    score=fmean(g.score for g in grades if g.score is not None))
    return RunTally(graded=graded, ungraded=frozenset(ungraded))


def mcnemar_exact_p(to_pass: int, to_fail: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts: the binomial test of ``to_pass``
    successes in ``to_pass + to_fail`` trials at 1/2; 1.0 when there is no discordant pair."""
    from scipy import stats  # here: the report of every run imports this module, and needs no scipy

    discordant = to_pass + to_fail
    if discordant == 0:
        return 1.0
    return float(stats.binomtest(to_pass, discordant).pvalue)  # scipy's defaults: p = 1/2, two-sided


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The percentile :data:`CONFIDENCE` interval of ``mean(b) - mean(a)`` over paired values, from
    :data:`BOOTSTRAP_RESAMPLES` resamples of the pairs with a fixed seed; None for fewer than two pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired values differ in number: {len(a)} and {len(b)}")
    if len(a) < 2:
        return None
    import numpy as np  # here, as scipy in mcnemar_exact_p
    from scipy import stats

    def mean_difference(first: np.ndarray, second: np.ndarray, axis: int) -> np.ndarray:
        """B's mean minus A's along ``axis`` (scipy passes it: vectorised over the resamples)."""
        return np.mean(second, axis=axis) - np.mean(first, axis=axis)

    found = stats.bootstrap((np.asarray(a), np.asarray(b)), mean_difference,
                            paired=True, method="percentile", confidence_level=CONFIDENCE,
                            n_resamples=BOOTSTRAP_RESAMPLES, batch=1000, rng=np.random.default_rng(BOOTSTRAP_SEED))
    interval = found.confidence_interval
    return round(float(interval.low), 6), round(float(interval.high), 6)


def _paired_cost(run: RunResults, task_ids: set[str]) -> float | None:
    """Estimated cost of ``task_ids`` (every epoch) in ``run``, at the run's prices; None for no task
    (nothing paired has no cost to compare, not a cost of $0)."""
    chosen = [r for r in run.results if r.task_id in task_ids]
    if not chosen:
        return None
    total: float | None = cost_summary(chosen, run.prices)["total"]
    return total


def compare_pair(a: RunResults, b: RunResults) -> PairedComparison:
    """Run ``b`` against run ``a`` over the tasks both graded (see the module's notes for each figure)."""
    tally_a, tally_b = tally_tasks(a.results), tally_tasks(b.results)
    common = tally_a.task_ids & tally_b.task_ids
    paired = sorted(set(tally_a.graded) & set(tally_b.graded))
    first, second = [tally_a.graded[t] for t in paired], [tally_b.graded[t] for t in paired]
    to_pass = [t.task_id for t, u in zip(first, second) if not t.majority_pass and u.majority_pass]
    to_fail = [t.task_id for t, u in zip(first, second) if t.majority_pass and not u.majority_pass]
    both_pass = sum(t.majority_pass and u.majority_pass for t, u in zip(first, second))
    rates_a, rates_b = [t.pass_rate for t in first], [t.pass_rate for t in second]
    scores_a, scores_b = [t.score for t in first], [t.score for t in second]
    cost_a, cost_b = _paired_cost(a, set(paired)), _paired_cost(b, set(paired))
    changed = [PassCountChange(task_id=t.task_id, passes_a=t.passes, epochs_a=t.epochs, passes_b=u.passes,
                               epochs_b=u.epochs)
               for t, u in zip(first, second) if (t.epochs > 1 or u.epochs > 1) and t.pass_rate != u.pass_rate]
    looked_a, looked_b = looked_by_turn(a.results), looked_by_turn(b.results)
    turns = sorted(set(looked_a) & set(looked_b))
    share_a, share_b = [looked_a[k] for k in turns], [looked_b[k] for k in turns]
    return PairedComparison(
        a=a.label, b=b.label, tasks=len(paired),
        only_in_a=sorted(tally_a.task_ids - common), only_in_b=sorted(tally_b.task_ids - common),
        ungraded_a=sorted(tally_a.ungraded & common), ungraded_b=sorted(tally_b.ungraded & common),
        flips_to_pass=to_pass, flips_to_fail=to_fail,
        both_pass=both_pass, both_fail=len(paired) - both_pass - len(to_pass) - len(to_fail),
        mcnemar_p=mcnemar_exact_p(len(to_pass), len(to_fail)) if paired else None,
        delta_apr=_delta(rates_a, rates_b), delta_apr_ci=paired_bootstrap_ci(rates_a, rates_b),
        delta_ars=_delta(scores_a, scores_b), delta_ars_ci=paired_bootstrap_ci(scores_a, scores_b),
        pass_counts_changed=changed, looked_turns=len(turns), delta_share_looked=_delta(share_a, share_b),
        delta_share_looked_ci=paired_bootstrap_ci(share_a, share_b),
        cost_a=cost_a, cost_b=cost_b,
        delta_cost=None if cost_a is None or cost_b is None else round(cost_b - cost_a, 6),
    )


def _delta(a: Sequence[float], b: Sequence[float]) -> float | None:
    return round(fmean(b) - fmean(a), 6) if a else None


def compare_pairs(runs: Sequence[RunResults]) -> list[PairedComparison]:
    """Every pair of ``runs`` in the order given: each later run against each earlier one."""
    return [compare_pair(a, b) for a, b in combinations(runs, 2)]
