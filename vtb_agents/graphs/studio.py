"""The category graphs and the grading graph as module-level objects, for ``langgraph dev`` / Studio.

``langgraph.json`` points here. The graphs are compiled without a checkpointer (the LangGraph
server brings its own) around the default strategy. Running a graph needs an
:class:`~vtb_agents.strategies.base.EpisodeContext` (model, sandbox, artifact store), which the
episode driver (``vtb run``) builds per task.
"""

from __future__ import annotations

from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.graphs.grading import build_grading_graph

region_switch = build_category_graph("region_switch")
hybrid_tool = build_category_graph("hybrid_tool")
follow_up = build_category_graph("follow_up")
temporal = build_category_graph("temporal")
progressive = build_category_graph("progressive")
grading = build_grading_graph()
