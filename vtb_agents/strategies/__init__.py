"""Strategies: what answers one turn. One contract (:mod:`vtb_agents.strategies.base`), a library
(react, zoom, marks, plan, reflect), and an adapter for your own LangChain agent."""

from typing import Any

from vtb_agents.strategies.base import (
    EpisodeContext,
    Strategy,
    TurnInput,
    TurnOutput,
    TurnState,
)
from vtb_agents.strategies.observe import show_tool_images
from vtb_agents.strategies.registry import BUILTIN, DEFAULT_STRATEGY, load_strategy

__all__ = ["BUILTIN", "DEFAULT_STRATEGY", "EpisodeContext", "ShowToolImages", "Strategy", "TurnInput",
           "TurnOutput", "TurnState", "agent_strategy", "load_agent", "load_strategy", "show_tool_images"]

_AGENT_ADAPTER = ("ShowToolImages", "agent_strategy", "load_agent")


def __getattr__(name: str) -> Any:
    """The agent adapter loads on first use: it imports ``langchain.agents``, which a run of the
    built-in strategies does not need."""
    if name in _AGENT_ADAPTER:
        from vtb_agents.strategies import agent

        return getattr(agent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
