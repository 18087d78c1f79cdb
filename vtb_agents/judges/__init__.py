"""Rubric judges: deterministic checks, the ``rule`` judge, the LLM judge and its cache.

The grading graph that applies them to an episode is :mod:`vtb_agents.judges.graph`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vtb_agents.defaults import OBJECT_PREFIX
from vtb_agents.extensions import build_extension, is_extension, load_extension
from vtb_agents.judges.base import Judgement, RubricJudge, RuleJudge, judge_problem
from vtb_agents.judges.grade import rubric_verdict, score_verdicts
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S

if TYPE_CHECKING:  # models.spec loads LangChain's chat models: only where a spec is resolved
    from vtb_agents.models.limiter import Budgets
    from vtb_agents.models.presets import Prices
    from vtb_agents.models.spec import ModelChoice


JudgeKind = Literal["rule", "model", "yours", "object"]
"""What a judge spec names: the ``rule`` judge, a model (the LLM judge), your own judge, or a Python
object a run was given (its name in ``run.json``, :data:`~vtb_agents.defaults.OBJECT_PREFIX`)."""


@dataclass(frozen=True)
class JudgeChoice:
    """A judge spec classified once: its ``kind`` and, for a model, the model resolved (``model``:
    what ``run.json`` records of the judge, :meth:`~vtb_agents.models.spec.ModelChoice.record`).
    ``batch_provider``: the provider whose batch API can ask its verdicts (None: it has none), told
    once by the run plan (:mod:`vtb_agents.runner.plan`, docs/how-to/batch-judging.md)."""

    spec: str
    kind: JudgeKind
    model: ModelChoice
    batch_provider: str | None = None

    @property
    def prices(self) -> Prices | None:
        """The judge model's prices (None: unknown, or no model), as the plan looked them up."""
        return self.model.prices

    @property
    def calls_model(self) -> bool:
        """Whether the judge is one of ours that asks a model (your own and objects say it themselves)."""
        return self.kind == "model"


def judge_choice(spec: str) -> JudgeChoice:
    """Classify the judge spec ``spec``: ``rule`` (deterministic checks only), ``provider:model`` or
    a preset name (the LLM judge; ``vtb models``, the paper's judge is ``o4-mini``), your own judge
    object (the contract of :class:`RubricJudge`) as ``package.module:attr`` or an installed
    judge's name (entry point group ``vtb_agents.judges``), or a recorded object's name.

    ``provider:model`` and ``package.module:attr`` tell apart by the dot: a provider name
    (``openai``) has none, so your judge's module is named with its package (``my_pkg.judges:strict``).
    An installed judge's name wins over a preset of the same name. A spec of none of these raises ValueError.
    """
    from vtb_agents.models.presets import find_preset
    from vtb_agents.models.spec import ModelChoice, model_choice, resolve_model

    if spec == "rule" or spec.startswith(OBJECT_PREFIX):
        return JudgeChoice(spec, "rule" if spec == "rule" else "object", model_choice(spec))
    if names_extension(spec):
        return JudgeChoice(spec, "yours", ModelChoice(spec))
    if ":" not in spec and find_preset(spec) is None:
        raise ValueError(f"judge spec {spec!r} is not 'rule', 'provider:model' (e.g. 'openai:o4-mini') "
                         "or a preset (see `vtb models`)")
    return JudgeChoice(spec, "model", resolve_model(spec))


def build_judge(choice: JudgeChoice, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                budgets: Budgets | None = None) -> RubricJudge:
    """The judge of a classified spec (:func:`judge_choice`). LLM judges go through ``init_chat_model``
    (:func:`~vtb_agents.models.spec.build_chat_model`: temperature 0, or 1 for reasoning models such
    as the paper's o4-mini judge), so OPENAI_BASE_URL works for OpenAI-compatible servers; each
    request times out after ``request_timeout_s`` and is paced by ``budgets``, the run's limiters (shared
    with the model's calls to the same account and model). A recorded object's name raises ValueError:
    the object itself is gone."""
    from vtb_agents.models.spec import refuse_object_name

    if choice.kind == "rule":
        return RuleJudge()
    if choice.kind == "object":
        refuse_object_name(choice.spec, "judge")
    if choice.kind == "yours":
        return judge_extension(choice.spec)
    return llm_judge(choice, request_timeout_s, budgets=budgets)



def llm_judge(choice: JudgeChoice, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
              base_url: str | None = None, attempts: int = 3, budgets: Budgets | None = None) -> RubricJudge:
    """The LLM judge of a classified model judge ``choice``, its model built from the resolved choice
    (``base_url``: where its requests go instead, such as the batch flow's relay; ``attempts`` per verdict;
    ``budgets``: the run's limiters, which pace its requests)."""
    from dataclasses import replace

    from vtb_agents.judges.llm import LLMJudge
    from vtb_agents.models.spec import build_chat_model

    model = choice.model if base_url is None else replace(
        choice.model, settings={**choice.model.settings, "base_url": base_url})
    return LLMJudge(build_chat_model(model, request_timeout_s, budgets=budgets), name=choice.spec, attempts=attempts)


def names_extension(spec: str) -> bool:
    """Whether the judge spec ``spec`` names your own judge (``package.module:attr`` or an installed
    judge's name) rather than a model (``provider:model`` or a preset), by :func:`judge_choice`'s rule."""
    return "." in spec.partition(":")[0] and ":" in spec or (":" not in spec and is_extension("judges", spec))


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


__all__ = ["JudgeChoice", "JudgeKind", "Judgement", "RubricJudge", "RuleJudge", "build_judge", "judge_choice",
           "judge_extension", "llm_judge", "names_extension", "rubric_verdict", "score_verdicts"]
