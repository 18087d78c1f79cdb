"""The five category graphs as module-level objects, for ``langgraph dev`` / LangGraph Studio.

``langgraph.json`` points here. The graphs are compiled without a checkpointer (the LangGraph
server brings its own) and with every tool of this build. Running a graph needs an
:class:`~vtb_agents.graphs.state.EpisodeContext` (model, sandbox, artifact store), which the
episode driver (``vtb run``) builds per task; in Studio they are for inspecting the structure.
"""

from __future__ import annotations

from vtb_agents.graphs.categories import (
    build_follow_up_graph,
    build_hybrid_tool_graph,
    build_progressive_graph,
    build_region_switch_graph,
    build_temporal_graph,
)
from vtb_agents.graphs.grading import build_grading_graph

region_switch = build_region_switch_graph()
hybrid_tool = build_hybrid_tool_graph()
follow_up = build_follow_up_graph()
temporal = build_temporal_graph()
progressive = build_progressive_graph()
grading = build_grading_graph()
