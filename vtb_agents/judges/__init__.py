"""Rubric judges: deterministic checks, the ``rule`` judge, and grading of episodes."""

from __future__ import annotations

from vtb_agents.judges.base import Judgement, RubricJudge, RuleJudge
from vtb_agents.judges.grade import grade_episode, score_verdicts


def load_judge(spec: str) -> RubricJudge:
    """The judge for ``spec``. ``rule``: deterministic checks only (others stay unjudged)."""
    if spec == "rule":
        return RuleJudge()
    raise ValueError(
        f"judge spec {spec!r} is not available in this version: use 'rule' "
        "(LLM judges 'provider:model' are tracked in the grading issue)"
    )


__all__ = ["Judgement", "RubricJudge", "RuleJudge", "grade_episode", "load_judge", "score_verdicts"]
