"""The five category graphs. They share one builder and differ only where the categories differ.

| category        | turns  | graph                                                        |
|-----------------|--------|--------------------------------------------------------------|
| region_switch   | single | model <-> vision / general tools                             |
| hybrid_tool     | single | model <-> vision / general tools                             |
| follow_up       | multi  | as above, plus the clarification node (interrupt on a question) |
| temporal        | multi  | as above; each turn's input brings that turn's new images      |
| progressive     | multi  | as above; later turns build on the answers already in the thread |

What makes temporal and progressive tasks what they are lives in the turns fed by the episode
driver (new images per turn, the history kept in the thread), which every category shares.
Each builder returns a compiled graph with input :class:`~vtb_agents.graphs.state.TurnInput`,
output :class:`~vtb_agents.graphs.state.TurnOutput` and context
:class:`~vtb_agents.graphs.state.EpisodeContext`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph

from vtb_agents.graphs.agent import build_agent_graph
from vtb_agents.tools import select_tools

GraphBuilder = Callable[..., CompiledStateGraph]


def _tools(tools: Sequence[BaseTool] | None) -> list[BaseTool]:
    return list(select_tools()) if tools is None else list(tools)


def build_region_switch_graph(tools: Sequence[BaseTool] | None = None, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Region-Switch Q&A: find, crop and read several small, distant regions of one image."""
    return build_agent_graph(_tools(tools), checkpointer=checkpointer, name="region_switch")


def build_hybrid_tool_graph(tools: Sequence[BaseTool] | None = None, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Hybrid Tool Reasoning: the vision tool combined with calculator, interpreter, search, weather."""
    return build_agent_graph(_tools(tools), checkpointer=checkpointer, name="hybrid_tool")


def build_follow_up_graph(tools: Sequence[BaseTool] | None = None, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Follow-up Test: an underspecified request; a clarifying question interrupts for the user's reply."""
    return build_agent_graph(_tools(tools), clarification=True, checkpointer=checkpointer, name="follow_up")


def build_temporal_graph(tools: Sequence[BaseTool] | None = None, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Temporal Visual Reasoning: a sequence of images across turns; earlier images stay in the thread."""
    return build_agent_graph(_tools(tools), checkpointer=checkpointer, name="temporal")


def build_progressive_graph(tools: Sequence[BaseTool] | None = None, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Progressive Visual Reasoning: interdependent questions on one image across turns."""
    return build_agent_graph(_tools(tools), checkpointer=checkpointer, name="progressive")


CATEGORY_GRAPHS: dict[str, GraphBuilder] = {
    "region_switch": build_region_switch_graph,
    "hybrid_tool": build_hybrid_tool_graph,
    "follow_up": build_follow_up_graph,
    "temporal": build_temporal_graph,
    "progressive": build_progressive_graph,
}


def graph_builder(category: str) -> GraphBuilder:
    """The builder for a normalised category; unknown categories get the plain agent graph."""
    return CATEGORY_GRAPHS.get(category, build_region_switch_graph)
