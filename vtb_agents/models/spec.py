"""Resolve a model spec: ``replay`` or ``provider:model`` via ``init_chat_model``."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from vtb_agents.models.replay import ReplayChatModel
from vtb_agents.tasks.model import Task

REPLAY = "replay"


def load_model(spec: str, task: Task) -> BaseChatModel:
    """The chat model for ``spec`` on ``task`` (the replay agent needs the task; others ignore it).

    ``provider:model`` specs go through ``langchain.chat_models.init_chat_model`` with temperature 0,
    so OPENAI_BASE_URL / OPENAI_API_KEY work as in langchain-openai.
    """
    if spec == REPLAY:
        return ReplayChatModel(task=task)
    if ":" not in spec:
        raise ValueError(f"model spec {spec!r} is not 'replay' or 'provider:model' (e.g. 'openai:gpt-4o')")
    from langchain.chat_models import init_chat_model

    return init_chat_model(spec, temperature=0)
