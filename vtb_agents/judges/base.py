"""The judge interface: decide one rubric of one turn from the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from vtb_agents.results import VerdictStatus
from vtb_agents.tasks.model import Rubric, Task


@dataclass(frozen=True)
class Judgement:
    """A judge's decision on one rubric, with a short reason (``cached``: re-used, not asked)."""

    status: VerdictStatus
    justification: str
    cached: bool = False


class RubricJudge(Protocol):
    """Decides rubrics that have no deterministic check (an LLM judge, or ``rule``: none)."""

    name: str

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """Judge ``rubric`` of turn ``turn`` (0-based) of ``task`` against ``answer``."""
        ...


class RuleJudge:
    """The ``rule`` judge: only deterministic checks decide; other rubrics stay unjudged."""

    name = "rule"

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """Report the rubric as unjudged (it has no check)."""
        return Judgement("unjudged", "no deterministic check and the judge is 'rule'")
