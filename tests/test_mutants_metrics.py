"""``summary.json`` with epochs, by hand: every breakdown of a run of two epochs has pass@k, missing
episodes count per epoch, and the region metric sits under its key. Part of ``make mutation``
(docs/development.md), beside ``tests/test_metrics.py``."""

from __future__ import annotations

from support.result_lines import result_line
from vtb_agents.analysis.cost import RunPrices
from vtb_agents.analysis.metrics import summarize
from vtb_agents.results import TurnRecord


def test_a_run_with_epochs_counts_missing_episodes_per_epoch_and_has_pass_at_k_in_every_breakdown():
    # two tasks of three expected, two epochs each: "a" passed once, "b" twice; task "c" never ran
    results = [result_line("a", score=1.0, passed=True, epoch=1), result_line("a", score=0.0, passed=False, epoch=2),
               result_line("b", score=1.0, passed=True, epoch=1), result_line("b", score=1.0, passed=True, epoch=2)]
    summary = summarize(results, judge_name="rule", prices=RunPrices(), expected=3, epochs=2)
    assert (summary["missing"], summary["complete"]) == (2, False)  # 3 tasks x 2 epochs - 4 episodes
    # a passed in one of its two epochs, b in both: pass@2 = 2/2, pass^2 = 1/2 (overall and in each group)
    assert (summary["pass_at_k"], summary["pass_hat_k"]) == (1.0, 0.5)
    for breakdown in ("by_category", "by_domain", "by_turncase"):
        (group,) = summary[breakdown].values()
        assert (group["n"], group["pass_at_k"], group["pass_hat_k"]) == (2, 1.0, 0.5), breakdown
    assert (summary["tasks"], summary["graded"], summary["ungraded"], summary["apr"]) == (2, 2, 0, 0.75)
    assert "n" not in summary  # the overall block's n is the summary's tasks
    # summary.json opens with the headline figures, then the overall block's intervals
    assert list(summary)[:8] == ["tasks", "graded", "ungraded", "epochs", "apr", "ars", "apr_stderr", "apr_ci95"]


def test_the_summary_holds_the_region_metric_under_region_iou():
    turns = [TurnRecord(index=0, answer="a", status="answered", best_crop_iou=0.5)]
    summary = summarize([result_line("a", score=1.0, passed=True, turns=turns, by_turn={0: True})], judge_name="rule",
                        prices=RunPrices())
    assert summary["region_iou"]["turns"] == 1 and summary["region_iou"]["pass_rate_when_looked"] == 1.0


def test_the_strategys_own_images_are_summed_over_episodes_by_operation():
    first, second = result_line("a", score=1.0, passed=True), result_line("b", score=1.0, passed=True)
    first.episode.strategy_image_ops = {"mark": 1, "crop": 2}  # a zoom strategy's two crops and a marked image
    second.episode.strategy_image_ops = {"crop": 1}
    ops = summarize([first, second], judge_name="rule", prices=RunPrices())["tool_metrics"]["strategy_image_ops"]
    assert list(ops.items()) == [("crop", 3), ("mark", 1)]
