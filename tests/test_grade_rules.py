"""One verdict per rubric, as docs/concepts/outcomes.md and metrics.md state: a check decides first, the judge
otherwise; an unanswered turn fails after the model's own failure and is an error after an
infrastructure one. Expected verdicts are written out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from vtb_agents.judges.base import Judgement
from vtb_agents.judges.grade import rubric_verdict
from vtb_agents.results import Episode, RubricVerdict, TurnRecord
from vtb_agents.tasks import load_tasks


class RecordingJudge:
    """A rubric judge that says "met" and remembers what it was asked."""

    name = "recording-judge"
    calls_model = True

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def judge(self, **kwargs: Any) -> Judgement:
        self.asked.append(kwargs)
        return Judgement("met", "looks right", cached=True)


def answered(answer: str) -> Episode:
    return Episode(task_id="t-corner", model="m", turns=[TurnRecord(index=0, answer=answer, status="answered")])


def failed(outcome: str, error: str) -> Episode:
    return Episode(task_id="t-corner", model="m", status="error", outcome=outcome, error=error)


@pytest.fixture
def task(task_root):
    return load_tasks(task_root)[0]  # r1: weight 5, flagged, a number check for 42; r2: weight 1, no check


def test_a_check_decides_its_rubric_and_the_judge_is_not_asked(task):
    judge = RecordingJudge()
    r1 = task.turns[0].rubrics[0]
    met = rubric_verdict(task, answered("It is 42."), judge, 0, r1)
    assert (met.rubric_id, met.turn, met.weight, met.status, met.judge, met.cached) == (
        "r1", 0, 5, "met", "check", False)
    assert (met.critical, met.critical_flag) == (True, True)
    missed = rubric_verdict(task, answered("It is 41."), judge, 0, r1)
    assert (missed.status, missed.judge) == ("not_met", "check")
    assert judge.asked == []


def test_a_rubric_without_a_check_goes_to_the_judge_with_the_turns_answer(task):
    judge = RecordingJudge()
    r2 = task.turns[0].rubrics[1]
    verdict = rubric_verdict(task, answered("It is 42."), judge, 0, r2)
    assert verdict == RubricVerdict(rubric_id="r2", turn=0, weight=1, critical=False, critical_flag=False,
                                    status="met", justification="looks right", judge="recording-judge", cached=True)
    assert judge.asked == [{"task": task, "turn": 0, "rubric": r2, "answer": "It is 42."}]


@pytest.mark.parametrize("episode, status, justification", [
    pytest.param(failed("provider_error", "HTTPStatusError: 500"), "error",
                 "no answer for turn 1: HTTPStatusError: 500", id="infrastructure: ungraded"),
    pytest.param(failed("step_limit", "GraphRecursionError: limit 22"), "not_met",
                 "no answer for turn 1: GraphRecursionError: limit 22", id="the model's own failure: not met"),
    pytest.param(failed("task_timeout", ""), "not_met", "no answer for turn 1: episode incomplete",
                 id="no error text"),
    pytest.param(Episode(task_id="t-corner", model="m"), "error", "no answer for turn 1: episode incomplete",
                 id="a completed episode without the turn: nobody knows whose doing"),
])
def test_an_unanswered_turn(task, episode, status, justification):
    judge = RecordingJudge()
    for rubric in task.turns[0].rubrics:  # with or without a check: no answer to check
        verdict = rubric_verdict(task, episode, judge, 0, rubric)
        assert (verdict.status, verdict.justification, verdict.judge) == (status, justification, "episode")
    assert judge.asked == []


def test_an_infrastructure_failure_voids_even_the_turns_it_answered(task):
    episode = answered("It is 42.").model_copy(update={"status": "error", "outcome": "sandbox_error",
                                                       "error": "SandboxError: gone"})
    verdict = rubric_verdict(task, episode, RecordingJudge(), 0, task.turns[0].rubrics[0])
    assert (verdict.status, verdict.justification) == ("error", "no answer for turn 1: SandboxError: gone")


def test_the_weight_rule_is_the_default_and_the_flag_is_kept_beside_it(task):
    r2 = task.turns[0].rubrics[1]
    r2.critical = True  # flagged by the dataset, weight 1
    by_weight = rubric_verdict(task, answered("42"), RecordingJudge(), 0, r2)
    assert (by_weight.critical, by_weight.critical_flag) == (False, True)
    by_flag = rubric_verdict(task, answered("42"), RecordingJudge(), 0, r2, "flag")
    assert (by_flag.critical, by_flag.critical_flag) == (True, True)


def test_score_verdicts_edge_cases_by_hand():
    from vtb_agents.judges.grade import score_verdicts

    def v(rubric_id: str, weight: int, status: str, turn: int = 0) -> RubricVerdict:
        return RubricVerdict(rubric_id=rubric_id, turn=turn, weight=weight, critical=weight >= 4, status=status)

    one = score_verdicts([v("a", 1, "met")])  # a single weight-1 rubric: 1 / 1
    assert (one.score, one.passed, one.graded, one.critical_rule) == (1.0, True, True, "weight")
    two = score_verdicts([v("a", 5, "unjudged"), v("b", 4, "unjudged", turn=1)])
    assert two.reason == "critical rubric(s) left unjudged: turn 1 a, turn 2 b"


class FreshJudge(RecordingJudge):
    """A judge whose verdicts are its own, fresh calls (nothing cached)."""

    def judge(self, **kwargs: Any) -> Judgement:
        self.asked.append(kwargs)
        return Judgement("met", "looks right")


class RuleLikeJudge(FreshJudge):
    """A deterministic judge: it declares that it calls no model."""

    calls_model = False


def test_only_a_fresh_verdict_of_a_model_judge_counts_as_a_model_call(task):
    r1, r2 = task.turns[0].rubrics  # r1 has a check, r2 goes to the judge
    fresh, cached, rule = FreshJudge(), RecordingJudge(), RuleLikeJudge()
    assert rubric_verdict(task, answered("It is 42."), fresh, 0, r2).model_call is True
    assert rubric_verdict(task, answered("It is 42."), cached, 0, r2).model_call is False  # from the cache
    assert rubric_verdict(task, answered("It is 42."), rule, 0, r2).model_call is False
    assert rubric_verdict(task, answered("It is 42."), fresh, 0, r1).model_call is False  # decided by its check
    unanswered = failed("provider_error", "HTTPStatusError: 500")
    assert [rubric_verdict(task, unanswered, fresh, 0, r).model_call for r in (r1, r2)] == [False, False]
    assert [len(j.asked) for j in (fresh, cached, rule)] == [1, 1, 1]
