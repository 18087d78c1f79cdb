"""Chat models: ``provider:model`` specs through ``init_chat_model``, and the ``replay`` agent."""

from vtb_agents.models.replay import ReplayChatModel
from vtb_agents.models.spec import chat_model, load_model, model_factory

__all__ = ["ReplayChatModel", "chat_model", "load_model", "model_factory"]
