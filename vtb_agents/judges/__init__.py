"""Rubric judges: deterministic checks, the ``rule`` judge, the LLM judge and its cache.

The grading graph that applies them to an episode is :mod:`vtb_agents.graphs.grading`.
"""

from __future__ import annotations

from vtb_agents.judges.base import Judgement, RubricJudge, RuleJudge
from vtb_agents.judges.grade import rubric_verdict, score_verdicts


def load_judge(spec: str) -> RubricJudge:
    """The judge for ``spec``: ``rule`` (deterministic checks only) or ``provider:model`` (LLM judge).

    LLM judges go through ``init_chat_model`` at temperature 0, so OPENAI_BASE_URL works for
    OpenAI-compatible servers.
    """
    if spec == "rule":
        return RuleJudge()
    if ":" not in spec:
        raise ValueError(f"judge spec {spec!r} is not 'rule' or 'provider:model' (e.g. 'openai:o4-mini')")
    from langchain.chat_models import init_chat_model

    from vtb_agents.judges.llm import LLMJudge

    return LLMJudge(init_chat_model(spec, temperature=0), name=spec)


__all__ = ["Judgement", "RubricJudge", "RuleJudge", "load_judge", "rubric_verdict", "score_verdicts"]
