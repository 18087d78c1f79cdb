"""Chat models: ``provider:model`` specs through ``init_chat_model``, and the ``replay`` agent.

The names below are imported on first use (PEP 562): ``vtb models`` and ``vtb --help`` read
``models.presets`` without paying for LangChain's chat-model modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtb_agents.models.replay import ReplayChatModel
    from vtb_agents.models.spec import chat_model, model_factory

__all__ = ["ReplayChatModel", "chat_model", "model_factory"]

_HOMES = {"ReplayChatModel": "replay", "chat_model": "spec", "model_factory": "spec"}


def __getattr__(name: str) -> Any:
    """Import ``name`` from its module when it is first asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
