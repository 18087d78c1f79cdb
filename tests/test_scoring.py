"""Scoring maths on hand-made verdicts: weights, critical gating, multi-turn pooling, ungraded tasks."""

from __future__ import annotations

import pytest

from vtb_agents.judges.grade import score_verdicts
from vtb_agents.results import RubricVerdict


def v(rubric_id: str, weight: int, status: str, *, turn: int = 0, critical: bool | None = None) -> RubricVerdict:
    return RubricVerdict(rubric_id=rubric_id, turn=turn, weight=weight,
                         critical=weight >= 4 if critical is None else critical, status=status)


def test_score_is_met_weight_over_total_weight():
    grade = score_verdicts([v("a", 5, "met"), v("b", 3, "not_met"), v("c", 2, "met")])
    assert grade.graded and grade.score == pytest.approx(7 / 10) and grade.passed is True


def test_one_unmet_critical_rubric_fails_the_task_whatever_the_score():
    grade = score_verdicts([v("a", 5, "not_met"), v("b", 1, "met"), v("c", 1, "met"), v("d", 3, "met")])
    assert grade.graded and grade.score == pytest.approx(5 / 10) and grade.passed is False


def test_a_task_without_critical_rubrics_passes():
    grade = score_verdicts([v("a", 3, "not_met"), v("b", 2, "met")])
    assert grade.score == pytest.approx(2 / 5) and grade.passed is True


def test_multi_turn_rubrics_are_pooled_with_a_per_turn_breakdown():
    verdicts = [v("a", 5, "met", turn=0), v("b", 1, "not_met", turn=0),
                v("a", 4, "not_met", turn=1), v("b", 2, "met", turn=1), v("c", 3, "met", turn=2)]
    grade = score_verdicts(verdicts)
    assert grade.score == pytest.approx((5 + 2 + 3) / 15) and grade.passed is False
    assert [(t.turn, round(t.score, 4), t.passed) for t in grade.by_turn] == [
        (0, round(5 / 6, 4), True), (1, round(2 / 6, 4), False), (2, 1.0, True)]


def test_unjudged_rubrics_are_left_out_of_the_score():
    grade = score_verdicts([v("a", 5, "met"), v("b", 3, "unjudged"), v("c", 2, "not_met")])
    assert grade.graded and grade.score == pytest.approx(5 / 7) and grade.passed is True


def test_an_unjudged_critical_rubric_leaves_the_task_ungraded():
    grade = score_verdicts([v("a", 5, "unjudged", turn=1), v("b", 3, "met")])
    assert not grade.graded and grade.score is None and grade.passed is None
    assert grade.reason == "critical rubric(s) left unjudged: turn 2 a"
    assert grade.by_turn[1].passed is None


def test_a_judge_error_leaves_the_task_ungraded_never_failed():
    grade = score_verdicts([v("a", 5, "met"), RubricVerdict(rubric_id="b", turn=0, weight=2, critical=False,
                                                            status="error", justification="judge failed")])
    assert not grade.graded and grade.passed is None and grade.reason.endswith("judge failed")


def test_no_rubrics_or_no_weight_is_ungraded():
    assert score_verdicts([]).reason == "task has no rubrics"
    assert score_verdicts([v("a", 2, "unjudged")]).reason == "no judged rubric carries weight"


@pytest.mark.parametrize("rule, passed", [("weight", True), ("flag", False), ("either", False)])
def test_critical_rule_decides_which_rubrics_gate(rule, passed, task_root):
    from vtb_agents.judges import RuleJudge
    from vtb_agents.judges.graph import grade_episode
    from vtb_agents.results import Episode, TurnRecord
    from vtb_agents.tasks import load_tasks

    task = load_tasks(task_root)[0]
    task.turns[0].rubrics[0].critical = True  # r1, weight 5: critical either way
    r2 = task.turns[0].rubrics[1]
    r2.weight, r2.critical = 2, True  # a weight-2 rubric flagged critical, like one in the dataset
    r2.check = type(task.turns[0].rubrics[0].check)(type="contains_any", values=["concise"])
    episode = Episode(task_id=task.id, model="m", turns=[TurnRecord(index=0, answer="It is 42.", status="answered")])
    grade = grade_episode(task, episode, RuleJudge(), rule)
    assert grade.graded and grade.passed is passed and grade.critical_rule == rule
    assert [v.critical_flag for v in grade.verdicts] == [True, True]
