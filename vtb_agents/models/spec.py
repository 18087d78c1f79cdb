"""Resolve a model spec: ``replay``, a preset name (``presets.toml``) or ``provider:model`` via
``init_chat_model``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.rate_limiters import BaseRateLimiter, InMemoryRateLimiter

from vtb_agents.defaults import OBJECT_PREFIX, REPLAY, AgentSpec
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S, PACED_PROVIDERS, client_options
from vtb_agents.models.limiter import Budgets, Caps, Limiters
from vtb_agents.models.presets import Prices, find_preset
from vtb_agents.models.replay import ReplayChatModel
from vtb_agents.tasks.model import Task

_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
"""OpenAI reasoning models accept only the default temperature (1), as the paper notes."""

ModelFactory = Callable[[Task], BaseChatModel]


def temperature_for(model_name: str) -> float:
    """0 where allowed; 1 for reasoning models that refuse any other temperature."""
    return 1.0 if _REASONING.match(model_name) else 0.0


@dataclass(frozen=True)
class ModelChoice:
    """A model spec resolved: the ``provider:model`` to build, the preset it came from, its settings,
    and its ``prices`` (None: unknown; set by the run plan, :mod:`vtb_agents.runner.plan`, which looks
    them up once; :meth:`record` records them, so that a finished run is priced as it was run)."""

    spec: str
    preset: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    prices: Prices | None = None

    def record(self) -> dict[str, Any]:
        """What ``run.json`` records of the model (:class:`~vtb_agents.rundir.records.ModelRecord`)."""
        return {"spec": self.spec, "preset": self.preset, "settings": dict(self.settings),
                "prices": self.prices.known() if self.prices is not None else None}


def refuse_object_name(spec: str, role: str) -> None:
    """Raise ValueError if ``spec`` is an object's name from ``run.json`` rather than a spec: the
    object itself is gone, so only Python, given it again, can run with it."""
    if spec.startswith(OBJECT_PREFIX):
        raise ValueError(f"{role} {spec!r} names a Python object a run was given (vtb_agents.evaluate), not a spec: "
                         "only Python can run with it, given the same object (evaluate(..., resume=True))")


def resolve_model(spec: str, extra: dict[str, Any] | None = None) -> ModelChoice:
    """Resolve a preset name or ``provider:model`` spec and merge ``extra`` settings over its own.

    A preset brings its settings (``presets.toml``); a plain spec gets temperature 0, or 1 for
    reasoning models (:func:`temperature_for`). ``extra`` (``--model-kwargs``) wins over both.
    """
    refuse_object_name(spec, "model")
    preset = find_preset(spec)
    if preset is not None:
        return ModelChoice(preset.spec, preset.name, {**preset.settings, **(extra or {})})
    provider, _, name = spec.partition(":")
    if not provider or not name:
        raise ValueError(f"model spec {spec!r} is not 'replay', 'provider:model' (e.g. 'openai:gpt-4o'), "
                         "a preset (see `vtb models`) or 'agent:module:function'")
    return ModelChoice(spec, None, {"temperature": temperature_for(name), **(extra or {})})


def model_choice(spec: str, extra: dict[str, Any] | None = None) -> ModelChoice:
    """Any model or judge spec resolved once, for ``run.json`` and for building the model
    (:func:`model_factory`): ``replay``, ``rule`` and ``agent:`` specs and objects' names have no
    chat-model settings of ours and stay as they are."""
    if spec in (REPLAY, "rule") or spec.startswith(OBJECT_PREFIX) or AgentSpec.parse(spec) is not None:
        return ModelChoice(spec, None, dict(extra or {}))
    return resolve_model(spec, extra)


def rate_limiter(requests_per_second: float | None) -> InMemoryRateLimiter | None:
    """A limiter pacing every call that shares it to ``requests_per_second`` (None: no pacing)."""
    if not requests_per_second:
        return None
    return InMemoryRateLimiter(requests_per_second=requests_per_second, check_every_n_seconds=0.05,
                               max_bucket_size=max(1.0, requests_per_second))


def build_chat_model(choice: ModelChoice, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
                     limiter: BaseRateLimiter | None = None, budgets: Budgets | None = None) -> BaseChatModel:
    """The chat model of a resolved ``choice``, through ``init_chat_model``.

    OPENAI_BASE_URL / OPENAI_API_KEY work as in langchain-openai, so any OpenAI-compatible server
    (vLLM, Ollama, LM Studio) is a model. An OpenAI(-compatible) model's requests go through vtb's
    transport, paced by ``budgets`` (the run's limiters, :mod:`vtb_agents.models.limiter`: one budget
    per account and model, shared with every client of the run that spends it); other providers'
    calls are paced by ``limiter`` (langchain-core's, at ``--rps``). Every request times out after
    ``request_timeout_s`` or at the task's time limit, whichever comes first
    (:mod:`vtb_agents.models.http`). The choice's settings (its preset's, ``--model-kwargs`` over
    them) go to the chat model.
    """
    from langchain.chat_models import init_chat_model

    provider, _, name = choice.spec.partition(":")
    if budgets is not None and provider in PACED_PROVIDERS:
        options: dict[str, Any] = {**client_options(provider, request_timeout_s, budgets, name), **choice.settings}
        return init_chat_model(choice.spec, **options)
    options = {**client_options(provider, request_timeout_s), **choice.settings}
    if limiter is not None:
        options["rate_limiter"] = limiter
    return init_chat_model(choice.spec, **options)


def chat_model(spec: str, requests_per_second: float | None = None,
               request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
               extra: dict[str, Any] | None = None, budgets: Budgets | None = None) -> BaseChatModel:
    """The chat model of a preset or ``provider:model`` spec (:func:`resolve_model`, then
    :func:`build_chat_model`), paced by ``budgets`` (default: limiters of its own capped at
    ``requests_per_second``; other providers: langchain-core's limiter at that rate); ``extra``
    settings (``--model-kwargs``) go over the preset's."""
    budgets = budgets or Limiters(Caps(requests_per_second=requests_per_second))
    return build_chat_model(resolve_model(spec, extra), request_timeout_s, limiter=rate_limiter(requests_per_second),
                            budgets=budgets)


def model_factory(choice: ModelChoice, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
                  limiter: BaseRateLimiter | None = None, budgets: Budgets | None = None,
                  model: BaseChatModel | None = None) -> ModelFactory:
    """A function giving the chat model for each task: a replay agent per task, or one shared
    :func:`build_chat_model` of ``choice`` (built once, so ``budgets`` and ``limiter`` pace every task
    of the process); ``model``, a chat model object from Python, is used as it is (its own timeouts and limits)."""
    if model is not None:
        given = model
        return lambda task: given
    if choice.spec == REPLAY:
        return lambda task: ReplayChatModel(task=task)
    refuse_object_name(choice.spec, "model")
    built = build_chat_model(choice, request_timeout_s, limiter=limiter, budgets=budgets)
    return lambda task: built
