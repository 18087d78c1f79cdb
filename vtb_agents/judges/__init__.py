"""Rubric judges: deterministic checks, the ``rule`` judge, the LLM judge and its cache.

The grading graph that applies them to an episode is :mod:`vtb_agents.judges.graph`.
"""

from __future__ import annotations

from typing import Any

from vtb_agents.extensions import build_extension, is_extension, load_extension
from vtb_agents.judges.base import Judgement, RubricJudge, RuleJudge, judge_problem
from vtb_agents.judges.grade import rubric_verdict, score_verdicts
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S
from vtb_agents.models.limiter import Budgets


def load_judge(spec: str, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
               limiters: Budgets | None = None) -> RubricJudge:
    """The judge for ``spec``: ``rule`` (deterministic checks only), ``provider:model`` (LLM judge),
    or your own judge object (the contract of :class:`RubricJudge`) as ``package.module:attr`` or
    an installed judge's name (entry point group ``vtb_agents.judges``).

    ``provider:model`` and ``package.module:attr`` tell apart by the dot: a provider name
    (``openai``) has none, so your judge's module is named with its package (``my_pkg.judges:strict``).
    An installed judge's name wins over a preset of the same name. A preset name (``vtb models``;
    the paper's judge is ``o4-mini``) works as a spec. LLM judges go
    through ``init_chat_model`` (:func:`~vtb_agents.models.spec.chat_model`: temperature
    0, or 1 for reasoning models such as the paper's o4-mini judge), so OPENAI_BASE_URL works for
    OpenAI-compatible servers; each request times out after ``request_timeout_s`` and is paced by
    ``limiters``, the run's (shared with the model's calls to the same account and model).
    """
    if spec == "rule":
        return RuleJudge()
    from vtb_agents.models.presets import find_preset
    from vtb_agents.models.spec import chat_model, refuse_object_name

    refuse_object_name(spec, "judge")
    if names_extension(spec):
        return judge_extension(spec)
    if ":" not in spec and find_preset(spec) is None:
        raise ValueError(f"judge spec {spec!r} is not 'rule', 'provider:model' (e.g. 'openai:o4-mini') "
                         "or a preset (see `vtb models`)")
    from vtb_agents.judges.llm import LLMJudge

    return LLMJudge(chat_model(spec, request_timeout_s=request_timeout_s, limiters=limiters), name=spec)


def names_extension(spec: str) -> bool:
    """Whether the judge spec ``spec`` names your own judge (``package.module:attr`` or an installed
    judge's name) rather than a model (``provider:model`` or a preset), by :func:`load_judge`'s rule."""
    return "." in spec.partition(":")[0] and ":" in spec or (":" not in spec and is_extension("judges", spec))


def judge_record(spec: str) -> dict[str, Any]:
    """What ``run.json`` records of the judge ``spec``: a model's resolved settings, or only the spec
    of your own judge (it has no chat-model settings of ours)."""
    if names_extension(spec):
        return {"spec": spec, "preset": None, "settings": {}}
    from vtb_agents.models.spec import model_record

    return model_record(spec)


def judge_extension(spec: str) -> RubricJudge:
    """Your judge named by ``module:attr`` or an entry point: the object, or what its class builds
    with no arguments; one that cannot be loaded or built, or breaks the judge contract, raises ValueError
    naming the spec and the cause."""
    target = load_extension("judges", spec)
    judge = build_extension("judges", spec, target) if isinstance(target, type) else target
    problem = judge_problem(judge)
    if problem is not None:
        raise ValueError(f"judge {spec!r} is not a judge (vtb_agents.judges.RubricJudge): {problem}")
    return judge


__all__ = ["Judgement", "RubricJudge", "RuleJudge", "judge_extension", "judge_record", "load_judge",
           "names_extension", "rubric_verdict", "score_verdicts"]
