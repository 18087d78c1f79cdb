"""Grading rules: one verdict per rubric (check first, judge otherwise), pooled into a task grade."""

from __future__ import annotations

from vtb_agents.config import CriticalRule
from vtb_agents.judges.base import Judgement, RubricJudge
from vtb_agents.judges.bounded import bounded_judgement, judge_time_limit
from vtb_agents.judges.checks import run_check
from vtb_agents.results import Episode, RubricVerdict, TaskGrade, TurnGrade, is_infrastructure
from vtb_agents.tasks.model import Rubric, Task


def judge_rubric(judge: RubricJudge, *, task: Task, turn: int, rubric: Rubric, answer: str,
                 limit_s: float | None = None) -> tuple[Judgement, str, bool]:
    """A rubric with a deterministic check is decided by it; any other goes to ``judge``, within
    ``limit_s`` (default :func:`~vtb_agents.judges.bounded.judge_time_limit`) or the current
    deadline (:func:`~vtb_agents.judges.bounded.bounded_judgement`: a failing judge gives an error
    judgement).

    Returns the judgement, who made it (``check`` or the judge's name) and whether a model was asked.
    """
    if rubric.check is not None:
        met, why = run_check(rubric.check, answer)
        return Judgement("met" if met else "not_met", why), "check", False
    judgement = bounded_judgement(judge, task=task, turn=turn, rubric=rubric, answer=answer,
                                  limit_s=judge_time_limit() if limit_s is None else limit_s)
    return judgement, judge.name, judge.calls_model


def rubric_verdict(task: Task, episode: Episode, judge: RubricJudge, turn: int, rubric: Rubric,
                   critical_rule: CriticalRule = "weight", limit_s: float | None = None) -> RubricVerdict:
    """The verdict on one rubric.

    After an infrastructure failure (provider, sandbox, storage) every rubric is an error, so the
    task is ungraded; a turn the model left unanswered because its episode failed for its own
    reasons (task timeout, step limit) is not met, as in the paper, where every task counts. A turn
    missing from an episode that claims completion (say, a target run without outputs given to
    the evaluator) is an error too: nothing says whose doing it was. ``limit_s`` bounds the judge
    call (:func:`judge_rubric`).
    """
    answers = {record.index: record.answer for record in episode.turns}
    reason = episode.error or "episode incomplete"
    model_call = False
    if is_infrastructure(episode.ended) or (turn not in answers and episode.status != "error"):
        judgement, source = Judgement("error", f"no answer for turn {turn + 1}: {reason}"), "episode"
    elif turn not in answers:
        judgement, source = Judgement("not_met", f"no answer for turn {turn + 1}: {reason}"), "episode"
    else:
        judgement, source, model_call = judge_rubric(judge, task=task, turn=turn, rubric=rubric, answer=answers[turn],
                                                       limit_s=limit_s)
    return RubricVerdict(
        rubric_id=rubric.id, turn=turn, weight=rubric.weight, critical=rubric.is_critical(critical_rule),
        critical_flag=rubric.critical,
        status=judgement.status, justification=judgement.justification, judge=source, cached=judgement.cached,
        model_call=model_call and not judgement.cached,
    )


def weighted(verdicts: list[RubricVerdict]) -> tuple[float | None, bool | None]:
    """(met weight over judged weight, all critical rubrics met) of ``verdicts``.

    Either is None when it cannot be decided: no judged weight, or a critical rubric that is
    unjudged or errored.
    """
    judged = [v for v in verdicts if v.status in ("met", "not_met")]
    total = sum(v.weight for v in judged)
    score = sum(v.weight for v in judged if v.status == "met") / total if total > 0 else None
    undecided = any(v.critical and v.status not in ("met", "not_met") for v in verdicts)
    passed = None if undecided else all(v.status == "met" for v in judged if v.critical)
    return score, passed


def score_verdicts(verdicts: list[RubricVerdict], critical_rule: CriticalRule = "weight") -> TaskGrade:
    """Weighted score over judged rubrics and pass/fail over critical ones (VTB_FACTS "Scoring"),
    pooled over all turns, plus each turn's own share.

    A task with any error verdict, or with a critical rubric left unjudged, is ungraded.
    """
    turns = sorted({v.turn for v in verdicts})
    by_turn: list[TurnGrade] = []
    for t in turns:
        score, passed = weighted([v for v in verdicts if v.turn == t])
        by_turn.append(TurnGrade(turn=t, score=score, passed=passed))
    grade = TaskGrade(verdicts=verdicts, critical_rule=critical_rule, by_turn=by_turn)
    errors = [v for v in verdicts if v.status == "error"]
    unjudged_critical = [v for v in verdicts if v.critical and v.status == "unjudged"]
    score, passed = weighted(verdicts)
    if errors:
        grade.reason = f"{len(errors)} rubric(s) could not be judged: {errors[0].justification}"
    elif not verdicts:
        grade.reason = "task has no rubrics"
    elif unjudged_critical:
        ids = ", ".join(f"turn {v.turn + 1} {v.rubric_id}" for v in unjudged_critical)
        grade.reason = f"critical rubric(s) left unjudged: {ids}"
    elif score is None:
        grade.reason = "no judged rubric carries weight"
    else:
        grade.score, grade.passed, grade.graded = score, passed, True
    return grade
