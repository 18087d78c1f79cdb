"""Resolve a model spec: ``replay`` or ``provider:model`` via ``init_chat_model``."""

from __future__ import annotations

import re
from typing import Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.rate_limiters import InMemoryRateLimiter

from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S, client_options
from vtb_agents.models.replay import ReplayChatModel
from vtb_agents.tasks.model import Task

REPLAY = "replay"
_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
"""OpenAI reasoning models accept only the default temperature (1), as the paper notes."""

ModelFactory = Callable[[Task], BaseChatModel]


def temperature_for(model_name: str) -> float:
    """0 where allowed; 1 for reasoning models that refuse any other temperature."""
    return 1.0 if _REASONING.match(model_name) else 0.0


def chat_model(spec: str, requests_per_second: float | None = None,
               request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> BaseChatModel:
    """The chat model of a ``provider:model`` spec, through ``langchain.chat_models.init_chat_model``.

    OPENAI_BASE_URL / OPENAI_API_KEY work as in langchain-openai, so any OpenAI-compatible server
    (vLLM, Ollama, LM Studio) is a model. ``requests_per_second`` paces all of the model's calls
    with langchain-core's ``InMemoryRateLimiter``. Every request times out after ``request_timeout_s``
    or at the task's time limit, whichever comes first (:mod:`vtb_agents.models.http`).
    """
    provider, _, name = spec.partition(":")
    if not provider or not name:
        raise ValueError(f"model spec {spec!r} is not 'replay', 'provider:model' (e.g. 'openai:gpt-4o') "
                         "or 'agent:module:function'")
    from langchain.chat_models import init_chat_model

    options: dict[str, object] = {"temperature": temperature_for(name), **client_options(provider, request_timeout_s)}
    if requests_per_second:
        options["rate_limiter"] = InMemoryRateLimiter(requests_per_second=requests_per_second,
                                                      check_every_n_seconds=0.05,
                                                      max_bucket_size=max(1.0, requests_per_second))
    return init_chat_model(spec, **options)


def model_factory(spec: str, requests_per_second: float | None = None,
                  request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> ModelFactory:
    """A function giving the chat model for each task: a replay agent per task, or one shared
    :func:`chat_model` (built once, so its rate limiter is shared by every task of the process)."""
    if spec == REPLAY:
        return lambda task: ReplayChatModel(task=task)
    model = chat_model(spec, requests_per_second, request_timeout_s)
    return lambda task: model


def load_model(spec: str, task: Task) -> BaseChatModel:
    """The chat model for ``spec`` on ``task`` (the replay agent needs the task; others ignore it)."""
    return model_factory(spec)(task)
