"""vtb-agents: VisualToolBench as LangGraph state graphs.

The Python API (:mod:`vtb_agents.api`): ``evaluate`` (and its async twin ``aevaluate``) runs and
grades tasks with a strategy or your own agent, specs or LangChain objects, returning an ``Evaluation``
(several models, ``model=[...]``: ``Evaluations``, with a leaderboard);
``load_tasks`` reads a task source, ``task_tools`` gives a task's tools bound to a fresh sandbox.
The subpackages hold the rest: ``tasks``, ``tools``, ``strategies``, ``graphs``, ``episodes``,
``judges``, ``analysis``, ``runner``, ``report``. ``RunConfig``
(:mod:`vtb_agents.config`) is what a run is: ``vtb_agents.rundir.read.read_record(path).config`` reads
a run's ``run.json`` back.
"""

from __future__ import annotations

from typing import Any

from vtb_agents.version import __version__ as __version__

__all__ = ["Evaluation", "Evaluations", "RunConfig", "aevaluate", "evaluate", "load_tasks", "task_tools"]


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use (``import vtb_agents`` stays light for the CLI);
    ``RunConfig``, the typed record of a run's settings, loads neither LangChain nor LangGraph."""
    if name == "RunConfig":
        from vtb_agents.config import RunConfig

        return RunConfig
    if name in __all__:
        from vtb_agents import api

        return getattr(api, name)
    raise AttributeError(f"module 'vtb_agents' has no attribute {name!r}")
