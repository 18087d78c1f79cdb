"""The graphs ``langgraph dev`` / Studio serve (``langgraph.json`` points here), ready to run.

Each takes a JSON context (:class:`~vtb_agents.config.RunConfig`: model spec, judge,
strategy, sandbox kind, limits; defaults from ``VTB_MODEL`` / ``VTB_JUDGE``) and resolves it into
the live objects ``vtb run`` would build. The five category graphs are chat graphs
(``{"messages": [...]}``, images as image content blocks) around the same category graphs ``vtb run``
uses; ``grading`` takes ``{"task", "answers"}`` and returns verdicts and score; ``task`` runs a
whole task (``{"task_id"}`` or ``{"task"}``) and ends with its grade. They are built when the
server imports this module, not by ``import vtb_agents.studio``.
"""

from __future__ import annotations

from vtb_agents.studio.chat import build_chat_graph
from vtb_agents.studio.grading import build_studio_grading_graph
from vtb_agents.studio.task import build_task_graph

region_switch = build_chat_graph("region_switch")
hybrid_tool = build_chat_graph("hybrid_tool")
follow_up = build_chat_graph("follow_up")
temporal = build_chat_graph("temporal")
progressive = build_chat_graph("progressive")
grading = build_studio_grading_graph()
task = build_task_graph()
