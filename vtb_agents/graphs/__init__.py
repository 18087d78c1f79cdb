"""LangGraph graphs: the five category graphs (around any strategy), clarification and resumers.

Names are imported on first use, so that strategies can use this package's lower modules
(``prompts``, ``state``) without loading the category graphs that use strategies. The grading
graph moved to :mod:`vtb_agents.judges.graph` (its names here are kept for one release), the
retry policy and the task deadline to :mod:`vtb_agents.models`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"CATEGORIES": "categories", "build_category_graph": "categories",
            "build_grading_graph": "grading", "grade_episode": "grading"}  # grading: a compat shim
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vtb_agents.graphs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vtb_agents.graphs.{_EXPORTS[name]}"), name)
