"""Resolve a model spec: ``replay``, a preset name (``presets.toml``) or ``provider:model`` via
``init_chat_model``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.rate_limiters import InMemoryRateLimiter

from vtb_agents.defaults import OBJECT_PREFIX, REPLAY, AgentSpec
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S, PACED_PROVIDERS, client_options
from vtb_agents.models.limiter import Budgets, Caps, Limiters
from vtb_agents.models.presets import find_preset
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
    """A model spec resolved: the ``provider:model`` to build, the preset it came from, its settings."""

    spec: str
    preset: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """What ``run.json`` and the report show of the model."""
        return {"spec": self.spec, "preset": self.preset, "settings": dict(self.settings)}


def object_name(obj: object) -> str:
    """What ``run.json`` records of a Python object used in a run (:data:`~vtb_agents.defaults.OBJECT_PREFIX`):
    its class and the model it calls (``object:ChatOpenAI(model=gpt-4o)``), or its name."""
    model = getattr(obj, "model_name", None) or getattr(obj, "model", None)
    if isinstance(model, str):
        return f"{OBJECT_PREFIX}{type(obj).__name__}(model={model})"
    name = getattr(obj, "name", None)
    if isinstance(name, str):
        return f"{OBJECT_PREFIX}{type(obj).__name__}(name={name})"
    qualname = getattr(obj, "__qualname__", None)  # a function, such as an agent factory
    if isinstance(qualname, str):
        return f"{OBJECT_PREFIX}{getattr(obj, '__module__', '?')}.{qualname}"
    return f"{OBJECT_PREFIX}{type(obj).__name__}"


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


def model_record(spec: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The resolved settings of any model or judge spec, for ``run.json`` (``replay``, ``rule`` and
    ``agent:`` specs and objects' names have no chat-model settings of ours)."""
    if spec in (REPLAY, "rule") or spec.startswith(OBJECT_PREFIX) or AgentSpec.parse(spec) is not None:
        return {"spec": spec, "preset": None, "settings": dict(extra or {})}
    return resolve_model(spec, extra).record()


def chat_model(spec: str, requests_per_second: float | None = None,
               request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
               extra: dict[str, Any] | None = None, limiters: Budgets | None = None) -> BaseChatModel:
    """The chat model of a preset or ``provider:model`` spec, through ``init_chat_model``.

    OPENAI_BASE_URL / OPENAI_API_KEY work as in langchain-openai, so any OpenAI-compatible server
    (vLLM, Ollama, LM Studio) is a model. An OpenAI(-compatible) model is paced by ``limiters``, the
    run's (:mod:`vtb_agents.models.limiter`: one budget per account and model, shared with every
    client of the run that spends it), or limiters of its own capped at ``requests_per_second``;
    other providers' calls are paced at ``requests_per_second`` by langchain-core's
    ``InMemoryRateLimiter``. Every request times out after ``request_timeout_s``
    or at the task's time limit, whichever comes first (:mod:`vtb_agents.models.http`). ``extra``
    settings (``--model-kwargs``) go to the chat model, over the preset's.
    """
    choice = resolve_model(spec, extra)
    from langchain.chat_models import init_chat_model

    provider, _, name = choice.spec.partition(":")
    if provider in PACED_PROVIDERS:
        budgets = limiters or Limiters(Caps(requests_per_second=requests_per_second))
        options: dict[str, Any] = {**client_options(provider, request_timeout_s, budgets, name), **choice.settings}
        return init_chat_model(choice.spec, **options)
    options = {**client_options(provider, request_timeout_s), **choice.settings}
    if requests_per_second:
        options["rate_limiter"] = InMemoryRateLimiter(requests_per_second=requests_per_second,
                                                      check_every_n_seconds=0.05,
                                                      max_bucket_size=max(1.0, requests_per_second))
    return init_chat_model(choice.spec, **options)


def model_factory(spec: str, requests_per_second: float | None = None,
                  request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S, *,
                  extra: dict[str, Any] | None = None, model: BaseChatModel | None = None,
                  limiters: Budgets | None = None) -> ModelFactory:
    """A function giving the chat model for each task: a replay agent per task, or one shared
    :func:`chat_model` (built once, so its rate limiter is shared by every task of the process);
    ``model``, a chat model object from Python, is used as it is (its own timeouts and limits);
    ``limiters``: the run's (:func:`chat_model`)."""
    if model is not None:
        given = model
        return lambda task: given
    if spec == REPLAY:
        return lambda task: ReplayChatModel(task=task)
    model = chat_model(spec, requests_per_second, request_timeout_s, extra=extra, limiters=limiters)
    return lambda task: model


def load_model(spec: str, task: Task) -> BaseChatModel:
    """The chat model for ``spec`` on ``task`` (the replay agent needs the task; others ignore it)."""
    return model_factory(spec)(task)
