"""LangGraph graphs: the five category graphs, the episode driver and the grading graph."""

from vtb_agents.graphs.agent import build_agent_graph
from vtb_agents.graphs.categories import (
    CATEGORY_GRAPHS,
    build_follow_up_graph,
    build_hybrid_tool_graph,
    build_progressive_graph,
    build_region_switch_graph,
    build_temporal_graph,
)
from vtb_agents.graphs.episode import EpisodeSettings, run_episode
from vtb_agents.graphs.grading import build_grading_graph, grade_episode

__all__ = [
    "CATEGORY_GRAPHS", "EpisodeSettings", "build_agent_graph", "build_follow_up_graph", "build_grading_graph",
    "build_hybrid_tool_graph", "build_progressive_graph", "build_region_switch_graph", "build_temporal_graph",
    "grade_episode", "run_episode",
]
