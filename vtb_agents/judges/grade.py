"""Grade an episode: one verdict per rubric (check first, judge otherwise), then the task score."""

from __future__ import annotations

from typing import Literal

from vtb_agents.judges.base import Judgement, RubricJudge
from vtb_agents.judges.checks import run_check
from vtb_agents.results import Episode, RubricVerdict, TaskGrade
from vtb_agents.tasks.model import Rubric, Task

CriticalRule = Literal["weight", "flag", "either"]


def judge_rubric(judge: RubricJudge, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
    """A rubric with a deterministic check is decided by it; any other goes to ``judge``."""
    if rubric.check is not None:
        met, why = run_check(rubric.check, answer)
        return Judgement("met" if met else "not_met", why)
    return judge.judge(task=task, turn=turn, rubric=rubric, answer=answer)


def grade_episode(task: Task, episode: Episode, judge: RubricJudge,
                  critical_rule: CriticalRule = "weight") -> TaskGrade:
    """Judge every rubric of every turn and pool them into one task grade (VTB_FACTS "Scoring")."""
    answers = {turn.index: turn.answer for turn in episode.turns}
    verdicts = []
    for turn_index, rubric in task.rubrics:
        if episode.status == "error" or turn_index not in answers:
            judgement = Judgement("error", f"no answer for turn {turn_index + 1}: {episode.error or 'episode incomplete'}")
            source = "episode"
        else:
            judgement = judge_rubric(judge, task=task, turn=turn_index, rubric=rubric, answer=answers[turn_index])
            source = "check" if rubric.check is not None else judge.name
        verdicts.append(RubricVerdict(
            rubric_id=rubric.id, turn=turn_index, weight=rubric.weight,
            critical=rubric.is_critical(critical_rule), status=judgement.status,
            justification=judgement.justification, judge=source,
        ))
    return score_verdicts(verdicts, critical_rule)


def score_verdicts(verdicts: list[RubricVerdict], critical_rule: CriticalRule = "weight") -> TaskGrade:
    """Weighted score over judged rubrics and pass/fail over critical ones.

    A task with any error verdict, or with a critical rubric left unjudged, is ungraded.
    """
    grade = TaskGrade(verdicts=verdicts, critical_rule=critical_rule)
    errors = [v for v in verdicts if v.status == "error"]
    if errors:
        grade.reason = f"{len(errors)} rubric(s) could not be judged: {errors[0].justification}"
        return grade
    if not verdicts:
        grade.reason = "task has no rubrics"
        return grade
    judged = [v for v in verdicts if v.status in ("met", "not_met")]
    unjudged_critical = [v for v in verdicts if v.critical and v.status == "unjudged"]
    if unjudged_critical:
        ids = ", ".join(f"turn {v.turn + 1} {v.rubric_id}" for v in unjudged_critical)
        grade.reason = f"critical rubric(s) left unjudged: {ids}"
        return grade
    total = sum(v.weight for v in judged)
    if total <= 0:
        grade.reason = "no judged rubric carries weight"
        return grade
    grade.score = sum(v.weight for v in judged if v.status == "met") / total
    grade.passed = all(v.status == "met" for v in judged if v.critical)
    grade.graded = True
    return grade
