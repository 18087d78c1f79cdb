"""The paired comparison by hand at its boundaries (docs/tutorials/compare-runs.md): tasks in one run
only, tasks ungraded in one run, a graded epoch without a score, a best IoU of exactly 0.5 in both
runs, a change of passing epochs that flips no majority, the cost of the paired tasks only, and the
bootstrap's recorded parameters. Part of ``make mutation`` (docs/development.md)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from support.result_lines import result_line
from vtb_agents.analysis.cost import RunPrices
from vtb_agents.analysis.paired import (PairedComparison, RunResults, TaskTally, compare_pair, compare_pairs,
                                        looked_by_turn, mcnemar_exact_p, paired_bootstrap_ci, tally_tasks)
from vtb_agents.models.presets import prices_for
from vtb_agents.results import TaskResult, TaskUsage, TokenUsage, TurnRecord

GPT4O_RULE = RunPrices(model=prices_for("gpt-4o"))
"""A gpt-4o run graded by the rule judge (no prices), as its run.json records them."""


def line(task_id: str, passed: bool | None, epoch: int = 1, *, ious: tuple[float | None, ...] = (),
         input_tokens: int = 0) -> TaskResult:
    """A line of ``task_id``: passed (score 1), failed (score 0.25) or ungraded by a judge error (None);
    one turn per entry of ``ious`` with that best crop IoU; ``input_tokens`` gpt-4o input tokens in one call."""
    turns = [TurnRecord(index=i, answer="a", status="answered", best_crop_iou=iou) for i, iou in enumerate(ious)]
    usage = TaskUsage(model=TokenUsage(calls=1, input_tokens=input_tokens, total_tokens=input_tokens))
    if passed is None:
        return result_line(task_id, outcome="judge_error", turns=turns or None, usage=usage, epoch=epoch)
    return result_line(task_id, score=1.0 if passed else 0.25, passed=passed, turns=turns or None, usage=usage,
                       epoch=epoch)


def test_majority_pass_is_strict_and_pass_rate_is_the_share():
    assert TaskTally("t", 3, 2, 0.5).majority_pass and not TaskTally("t", 4, 2, 0.5).majority_pass
    assert TaskTally("t", 4, 3, 0.5).pass_rate == 0.75


def test_a_graded_epoch_without_a_score_leaves_its_task_ungraded():
    no_score = result_line("b", score=None, graded=True, passed=True)
    tally = tally_tasks([line("a", True), line("a", False, 2), no_score])
    assert tally.ungraded == {"b"} and tally.task_ids == {"a", "b"}
    assert tally.graded["a"] == TaskTally("a", 2, 1, 0.625)


def test_mcnemar_with_all_flips_one_way():
    # 0 of 5 flips to pass: 2 x P(X <= 0), X ~ Bin(5, 1/2) = 2 / 32; 1 of 5: 2 x (1 + 5) / 32
    assert mcnemar_exact_p(0, 5) == pytest.approx(0.0625) and mcnemar_exact_p(5, 0) == pytest.approx(0.0625)
    assert mcnemar_exact_p(1, 4) == pytest.approx(0.375)


def test_bootstrap_refuses_values_that_do_not_pair():
    with pytest.raises(ValueError, match="paired values differ in number: 2 and 3"):
        paired_bootstrap_ci([0.0, 1.0], [0.0, 1.0, 1.0])


def test_bootstrap_is_paired_and_b_minus_a():
    # every pair differs by exactly -1 (B below A): every resample's mean difference is -1; resampling
    # A and B apart would mix pairs and give a wide interval
    assert paired_bootstrap_ci([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0]) == (-1.0, -1.0)


def test_the_recorded_bootstrap_parameters_reproduce_the_interval():
    # scores of four decimals, whose resampled means take many values: the interval's ends move with the
    # seed, the number of resamples and the confidence (9,999 resamples move the lower end by 2e-6)
    a = [0.9137, 0.1529, 0.6071, 0.7243, 0.3318, 0.0562, 0.4871, 0.8123, 0.2741, 0.6457, 0.5189, 0.3963]
    b = [0.9561, 0.4027, 0.5839, 0.9011, 0.3173, 0.5077, 0.7049, 0.8467, 0.2213, 0.9907, 0.6631, 0.3349]
    record = PairedComparison.model_fields
    resamples, seed, level = (record[k].default for k in ("bootstrap_resamples", "bootstrap_seed", "confidence"))
    # what a reader of `vtb compare --json` would do with the recorded resamples, seed and confidence
    found = stats.bootstrap((np.asarray(a, float), np.asarray(b, float)),
                            lambda x, y, axis=-1: y.mean(axis) - x.mean(axis),
                            paired=True, method="percentile", confidence_level=level, n_resamples=resamples,
                            rng=np.random.default_rng(seed)).confidence_interval
    assert paired_bootstrap_ci(a, b) == (round(found.low, 6), round(found.high, 6))
    assert paired_bootstrap_ci(a, b) == paired_bootstrap_ci(a, b)  # the same runs, the same interval


def test_looked_by_turn_averages_epochs_and_counts_exactly_half():
    results = [line("a", True, 1, ious=(0.5, 0.2)), line("a", True, 2, ious=(0.4, None)), line("b", True, ious=(None,))]
    assert looked_by_turn(results) == {("a", 0): 0.5, ("a", 1): 0.0}


def test_compare_pair_lists_unpaired_tasks_and_compares_only_the_paired():
    a = [line("both", True, ious=(0.5, 0.7), input_tokens=400_000),
         line("flip", False, ious=(0.1,), input_tokens=400_000),
         line("only-a", True, ious=(0.9,), input_tokens=4_000_000), line("ungraded-b", True, input_tokens=4_000_000),
         line("ungraded-a", None)]
    b = [line("both", True, ious=(0.49, None), input_tokens=800_000),
         line("flip", True, ious=(0.9,), input_tokens=1_000_000),
         line("only-b", False, input_tokens=4_000_000), line("ungraded-b", None), line("ungraded-a", False)]
    pair = compare_pair(RunResults("A", a, GPT4O_RULE), RunResults("B", b, GPT4O_RULE))
    assert (pair.a, pair.b, pair.tasks) == ("A", "B", 2)
    assert (pair.only_in_a, pair.only_in_b, pair.ungraded_a, pair.ungraded_b) == (
        ["only-a"], ["only-b"], ["ungraded-a"], ["ungraded-b"])
    assert pair.unpaired
    assert (pair.flips_to_pass, pair.flips_to_fail, pair.both_pass, pair.both_fail) == (["flip"], [], 1, 0)
    assert pair.mcnemar_p == 1.0  # one discordant task: 2 x P(X <= 0), X ~ Bin(1, 1/2) = 1
    assert (pair.delta_apr, pair.delta_ars) == (0.5, 0.375)  # pass rates 1, 0 -> 1, 1; scores 1, .25 -> 1, 1
    # two pairs, differences 0 and 1 (0 and 0.75): a resample's mean is 0, half or all of the second
    assert (pair.delta_apr_ci, pair.delta_ars_ci) == ((0.0, 1.0), (0.0, 0.75))
    assert pair.pass_counts_changed == []  # one epoch each: a flip, not a change of counts
    # two turns measured in both runs (both/1 is in A only, only-a unpaired): A looked at 0.5 (exactly)
    # and not at 0.1; B not at 0.49, looked at 0.9
    assert (pair.looked_turns, pair.delta_share_looked) == (2, 0.0)
    assert pair.delta_share_looked_ci == (-1.0, 1.0)  # differences -1 and +1: a resample's mean is -1, 0 or 1
    # cost of the paired tasks only, 2.5 USD per million gpt-4o input tokens: A 800,000 -> 2.0, B 1,800,000 -> 4.5
    assert (pair.cost_a, pair.cost_b, pair.delta_cost) == (2.0, 4.5, 2.5)
    unpriced = compare_pair(RunResults("A", a, GPT4O_RULE), RunResults("B", b, RunPrices()))
    assert (unpriced.cost_a, unpriced.cost_b, unpriced.delta_cost) == (2.0, None, None)  # B's model has no prices


def test_compare_pair_of_runs_with_nothing_paired():
    a, b = [line("x", True, input_tokens=1000)], [line("y", True, input_tokens=1000)]
    pair = compare_pair(RunResults("A", a, GPT4O_RULE), RunResults("B", b, GPT4O_RULE))
    assert (pair.tasks, pair.mcnemar_p, pair.delta_apr, pair.delta_apr_ci) == (0, None, None, None)
    assert (pair.cost_a, pair.cost_b, pair.delta_cost) == (None, None, None)  # nothing paired: no cost, not $0
    assert (pair.looked_turns, pair.delta_share_looked, pair.delta_share_looked_ci) == (0, None, None)


def test_pass_counts_that_change_without_a_flip_are_listed():
    a = [line("t", True, 1), line("t", True, 2), line("t", True, 3), line("u", True, 1), line("v", True, 1),
         line("w", True, 1), line("w", False, 2)]
    b = [line("t", True, 1), line("t", False, 2), line("t", True, 3), line("u", True, 1), line("u", True, 2),
         line("v", False, 1), line("v", True, 2), line("w", True, 1)]
    pair = compare_pair(RunResults("A", a, RunPrices()), RunResults("B", b, RunPrices()))
    # t: 3/3 -> 2/3, a change but no flip; u: 1/1 -> 2/2, no change; v: 1/1 -> 1/2, a flip (a tie fails)
    # and a change; w: 1/2 -> 1/1, a flip to pass with two epochs in A only
    assert [(c.task_id, c.passes_a, c.epochs_a, c.passes_b, c.epochs_b) for c in pair.pass_counts_changed] == [
        ("t", 3, 3, 2, 3), ("v", 1, 1, 1, 2), ("w", 1, 2, 1, 1)]
    assert (pair.flips_to_pass, pair.flips_to_fail, pair.both_pass) == (["w"], ["v"], 2)
    # pass rates A 1, 1, 1, 1/2 and B 2/3, 1, 1/2, 1: mean difference (-1/3 + 0 - 1/2 + 1/2) / 4 = -0.083333
    assert pair.delta_apr == -0.083333


def test_compare_pairs_takes_each_later_run_against_each_earlier_one():
    runs = [RunResults(name, [line("t", True)], RunPrices()) for name in ("A", "B", "C")]
    assert [(p.a, p.b) for p in compare_pairs(runs)] == [("A", "B"), ("A", "C"), ("B", "C")]
    assert not compare_pairs(runs)[0].unpaired
