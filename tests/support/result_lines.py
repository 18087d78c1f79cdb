"""Result lines built from literals for the hand-computed figure tests (``test_mutants_*.py``): a
:class:`TaskResult` with the grade, turns, usage and outcome a test states, nothing computed."""

from __future__ import annotations

from vtb_agents.results import Episode, TaskGrade, TaskResult, TaskUsage, TurnGrade, TurnRecord


def result_line(task_id: str, *, category: str = "Chart Q&A", passed: bool | None = None, score: float | None = None,
                graded: bool | None = None, outcome: str = "answered", turns: list[TurnRecord] | None = None,
                by_turn: dict[int, bool | None] | None = None, usage: TaskUsage | None = None,
                epoch: int = 1) -> TaskResult:
    """A result line: graded when ``score`` is given (unless ``graded`` says otherwise), its turns'
    passes ``by_turn``, ``usage`` as recorded, ``outcome`` the task's (and the episode's, except for the
    grading's own outcomes ``judge_error`` and ``unjudged``, whose episode was answered)."""
    graded = score is not None if graded is None else graded
    ended = "answered" if outcome in ("judge_error", "unjudged") else outcome
    episode = Episode(task_id=task_id, model="m", outcome=ended,
                      status="error" if ended in ("provider_error", "step_limit", "sandbox_error") else "completed",
                      turns=turns if turns is not None else [TurnRecord(index=0, answer="a", status="answered")])
    grade = TaskGrade(score=score, passed=passed, graded=graded, reason=None if graded else "ungraded",
                      by_turn=[TurnGrade(turn=t, passed=p) for t, p in (by_turn or {}).items()])
    return TaskResult(task_id=task_id, epoch=epoch, category=category, category_raw=category, domain="finance",
                      domain_raw="finance", turncase="single", model="m", episode=episode, grade=grade,
                      duration_s=1.0, usage=usage, outcome=outcome)
