"""Strategies: what answers one turn. One contract (:mod:`vtb_agents.strategies.base`), a library
(react, zoom, marks, plan, reflect), and an adapter for your own LangChain agent."""

from vtb_agents.strategies.agent import ShowToolImages, agent_strategy, load_agent_factory
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
           "TurnOutput", "TurnState", "agent_strategy", "load_agent_factory", "load_strategy", "show_tool_images"]
