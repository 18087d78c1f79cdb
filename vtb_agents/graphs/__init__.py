"""LangGraph graphs: the five category graphs (around any strategy), clarification and resumers.

Names are imported on first use, so that strategies can use this package's lower modules
(``prompts``, ``state``) without loading the category graphs that use strategies. The grading
graph is :mod:`vtb_agents.judges.graph`; the retry policy and the task deadline are in
:mod:`vtb_agents.models`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"CATEGORIES": "categories", "build_category_graph": "categories"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vtb_agents.graphs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vtb_agents.graphs.{_EXPORTS[name]}"), name)
