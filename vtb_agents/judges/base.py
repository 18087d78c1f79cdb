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
    """Decides rubrics that have no deterministic check (an LLM judge, or ``rule``: none).

    ``calls_model`` declares whether ``judge`` asks a model: only such judgements count as judge
    calls in a run's summary (and go through the verdict cache); a deterministic judge says False.
    """

    name: str
    calls_model: bool

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """Judge ``rubric`` of turn ``turn`` (0-based) of ``task`` against ``answer``."""
        ...


class RuleJudge:
    """The ``rule`` judge: only deterministic checks decide; other rubrics stay unjudged."""

    name = "rule"
    calls_model = False

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """Report the rubric as unjudged (it has no check)."""
        return Judgement("unjudged", "no deterministic check and the judge is 'rule'")


def judge_problem(judge: object) -> str | None:
    """What keeps ``judge`` from meeting the :class:`RubricJudge` contract, or None if it does."""
    if not isinstance(getattr(judge, "name", None), str):
        return "it has no 'name' string"
    if not callable(getattr(judge, "judge", None)):
        return "it has no 'judge' method"
    if not isinstance(getattr(judge, "calls_model", None), bool):
        return "it does not declare 'calls_model' (True or False: whether it asks a model)"
    return None
