"""LangGraph Studio / ``langgraph dev``: the category graphs, the grading graph and a task graph that
run over the LangGraph API with a JSON context (:class:`~vtb_agents.config.RunConfig`) and resolve it into live
objects themselves (model, the thread's sandbox and artifacts, tools, judge).

``langgraph.json`` points at the module-level graphs of :mod:`vtb_agents.studio.graphs`.
"""

from vtb_agents.studio.chat import build_chat_graph
from vtb_agents.studio.grading import build_studio_grading_graph
from vtb_agents.studio.sessions import SESSIONS, studio_root
from vtb_agents.studio.task import build_task_graph

__all__ = ["SESSIONS", "build_chat_graph", "build_studio_grading_graph", "build_task_graph",
           "studio_root"]
