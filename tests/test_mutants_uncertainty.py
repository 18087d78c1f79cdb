"""The intervals by hand at their boundaries (docs/concepts/epochs.md): two tasks (one degree of
freedom), an interval clipped at one end only, one inside 0..1, a task whose epochs are partly
ungraded, pass@k over the tasks with all k epochs graded. Part of ``make mutation``
(docs/development.md). Student's t quantiles are the tables': t(0.975, 1) = 12.706205,
t(0.975, 2) = 4.302653, t(0.975, 4) = 2.776445."""

from __future__ import annotations

import pytest

from support.result_lines import result_line
from vtb_agents.analysis.uncertainty import (Estimate, TaskEpochs, apr_estimate, ars_estimate, by_task, estimate,
                                             pass_at_k, t_quantile)


def test_t_quantile_is_the_tables_at_the_upper_and_lower_tail():
    assert round(t_quantile(0.975, 1), 6) == 12.706205
    assert round(t_quantile(0.975, 4), 6) == 2.776445
    assert round(t_quantile(0.025, 2), 6) == -4.302653


def test_an_interval_inside_zero_to_one():
    # mean 0.7; squares of deviations .04 .01 0 .01 .04 = .1, s^2 = .1 / 4 = .025, s = .158114,
    # stderr = .158114 / sqrt 5 = .070711; half width 2.776445 x .070711 = .196324
    assert estimate([0.5, 0.6, 0.7, 0.8, 0.9]) == Estimate(0.7, 0.070711, (0.503676, 0.896324))


def test_an_interval_is_clipped_at_the_end_it_crosses_only():
    # mean 0.1, s = 0.1, stderr = 0.1 / sqrt 3 = .057735; half width 4.302653 x .057735 = .248414
    assert estimate([0.0, 0.1, 0.2]) == Estimate(0.1, 0.057735, (0.0, 0.348414))
    assert estimate([0.8, 0.9, 1.0]) == Estimate(0.9, 0.057735, (0.651586, 1.0))


def test_two_tasks_have_an_interval_and_one_task_none():
    # mean 0.5, s^2 = (.01 + .01) / 1, s = .141421, stderr = .141421 / sqrt 2 = 0.1; half width 1.270621
    assert estimate([0.4, 0.6]) == Estimate(0.5, 0.1, (0.0, 1.0))
    assert estimate([0.123456789]) == Estimate(0.123457, None, None)
    assert estimate([]) == Estimate(None, None, None)


def test_by_task_keeps_the_first_seen_order_and_only_graded_epochs():
    results = [result_line("b", score=1.0, passed=True, epoch=1),
               result_line("a", score=0.25, passed=False, epoch=1),
               result_line("b", outcome="provider_error", epoch=2),  # ungraded: counted as an episode only
               result_line("a", score=None, graded=True, passed=None, epoch=2),  # graded without a score or pass
               result_line("b", score=0.5, passed=True, epoch=3)]
    assert by_task(results) == [TaskEpochs("b", 3, [True, True], [1.0, 0.5]),
                                TaskEpochs("a", 2, [False, False], [0.25])]


def test_apr_and_ars_average_each_task_over_its_epochs_first_and_skip_tasks_with_none_graded():
    tasks = [TaskEpochs("a", 2, [True, False], [1.0, 0.5]),  # pass 0.5, score 0.75
             TaskEpochs("b", 1, [True], [0.25]),  # pass 1, score 0.25
             TaskEpochs("c", 2, [], []),  # nothing graded: left out of both
             TaskEpochs("d", 1, [False], [])]  # a pass without a score: in APR only
    # APR over 0.5, 1, 0: mean 0.5, s = 0.5, stderr = 0.5 / sqrt 3 = .288675
    apr = apr_estimate(tasks)
    assert (apr.mean, apr.stderr) == (0.5, 0.288675)
    # ARS over 0.75, 0.25: mean 0.5, s = .353553, stderr = 0.25
    ars = ars_estimate(tasks)
    assert (ars.mean, ars.stderr) == (0.5, 0.25)


def test_pass_at_k_counts_only_tasks_with_all_k_epochs_graded():
    tasks = [TaskEpochs("a", 3, [True, False, False]), TaskEpochs("b", 3, [True, True, True]),
             TaskEpochs("c", 3, [False, False, False]), TaskEpochs("d", 3, [True, True]),  # one epoch ungraded
             TaskEpochs("e", 4, [True, True, True, True])]  # more than k graded (not a run of k epochs)
    assert pass_at_k(tasks, 3) == (0.666667, 0.333333)  # a, b, c: two passed once, one passed every time
    assert pass_at_k(tasks, 2) == (1.0, 1.0)  # only d has exactly 2
    assert pass_at_k(tasks, 5) == (None, None)


@pytest.mark.parametrize("values, mean", [([0.0, 0.0, 1.0], 0.333333), ([1 / 3, 1 / 3], 0.333333)])
def test_means_are_rounded_to_six_places(values, mean):
    assert estimate(values).mean == mean
