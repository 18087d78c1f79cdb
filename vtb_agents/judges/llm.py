"""The LLM judge: any ``provider:model`` with structured output, one criterion per call.

Failures (malformed 200 responses included) are retried with exponential backoff (LangChain's
``with_retry``), capped as for the model (:mod:`vtb_agents.models.retry`); a judge that still
fails gives an ``error`` judgement, so the task is reported ungraded, never silently failed.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from vtb_agents.judges.base import Judgement
from vtb_agents.judges.prompt import SYSTEM, judge_prompt
from vtb_agents.models.retry import BACKOFF_INITIAL_S, BACKOFF_MAX_S, with_backoff
from vtb_agents.tasks.model import Rubric, Task


class JudgeVerdict(BaseModel):
    """The structured reply the judge model must give."""

    verdict: Literal["met", "not_met"] = Field(description="Whether the answer meets the criterion.")
    justification: str = Field(description="One or two sentences explaining the verdict.")


class LLMJudge:
    """Judges a rubric by asking a chat model for a :class:`JudgeVerdict`."""

    calls_model = True

    def __init__(self, model: BaseChatModel, name: str, *, attempts: int = 3,
                 backoff_initial_s: float = BACKOFF_INITIAL_S, backoff_max_s: float = BACKOFF_MAX_S,
                 method: Literal["json_schema", "function_calling", "json_mode"] = "json_schema") -> None:
        self.name = name
        self.attempts = attempts
        self._runnable = with_backoff(model.with_structured_output(JudgeVerdict, method=method), attempts,
                                      backoff_initial_s, backoff_max_s)

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        """Ask the model; after ``attempts`` failures return an ``error`` judgement naming the cause."""
        messages = [SystemMessage(SYSTEM), HumanMessage(judge_prompt(task, turn, rubric, answer))]
        try:
            reply: Any = self._runnable.invoke(messages)
        except Exception as exc:  # recorded as a judge error: the task becomes ungraded, visibly
            return Judgement("error", f"judge failed after {self.attempts} attempts: {type(exc).__name__}: {exc}"[:500])
        if not isinstance(reply, JudgeVerdict):
            return Judgement("error", f"judge gave no verdict (got {type(reply).__name__})")
        return Judgement(reply.verdict, reply.justification.strip())
