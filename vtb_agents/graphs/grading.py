"""Compatibility shim, kept for one release: the grading graph moved to :mod:`vtb_agents.judges.graph`."""

from vtb_agents.judges.graph import *  # noqa: F401,F403
from vtb_agents.judges.graph import GradingContext, GradingState, build_grading_graph, grade_episode  # noqa: F401
