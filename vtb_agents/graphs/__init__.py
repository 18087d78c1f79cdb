"""LangGraph graphs: the five category graphs (around any strategy) and the grading graph."""

from vtb_agents.graphs.categories import CATEGORIES, build_category_graph
from vtb_agents.graphs.grading import build_grading_graph, grade_episode

__all__ = ["CATEGORIES", "build_category_graph", "build_grading_graph", "grade_episode"]
