"""Run any LangChain agent on VisualToolBench tasks (compatibility module).

The adapter now lives in :mod:`vtb_agents.strategies.agent`, and your agent runs through the one
episode driver like every strategy. These names stay importable from here for one release.
"""

from __future__ import annotations

from typing import Literal, Sequence

from langchain_core.tools import BaseTool

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.config import EpisodeSettings
from vtb_agents.episodes.driver import run_episode
from vtb_agents.results import Episode
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.strategies.agent import AGENT_PREFIX, AgentFactory, agent_strategy, load_agent_factory
from vtb_agents.strategies.base import DEFAULT_MAX_IMAGE_SIDE
from vtb_agents.tasks.model import Task
from vtb_agents.tools import bind_episode_tools, select_tools
from vtb_agents.tools.python_tools import CODE_TOOL_NAMES, DEFAULT_CODE_TIMEOUT_S


def episode_tools(sandbox: Sandbox, artifacts: ArtifactStore, *, timeout_s: float = DEFAULT_CODE_TIMEOUT_S,
                  no_vision_tool: bool = False, shared: Sequence[BaseTool] | None = None) -> list[BaseTool]:
    """The VTB tools bound to one task's sandbox, ready for any LangChain agent: both code tools
    (not the vision tool with ``no_vision_tool``) and the ``shared`` tools (default: the others)."""
    shared = select_tools() if shared is None else list(shared)
    code = [t for t in select_tools(no_vision_tool=no_vision_tool) if t.name in CODE_TOOL_NAMES]
    return bind_episode_tools([*code, *(t for t in shared if t.name not in CODE_TOOL_NAMES)], sandbox, artifacts,
                              timeout_s)


def run_agent_episode(task: Task, factory: AgentFactory, *, sandbox: Sandbox, artifacts: ArtifactStore,
                      model_name: str, history: Literal["golden", "model"] = "golden",
                      max_image_side: int = DEFAULT_MAX_IMAGE_SIDE,
                      tools: Sequence[BaseTool] | None = None,
                      task_timeout_s: float | None = None) -> Episode:
    """Run every turn of ``task`` with the user's agent through the episode driver."""
    settings = EpisodeSettings(history=history, max_image_side=max_image_side, task_timeout_s=task_timeout_s)
    return run_episode(task, None, select_tools() if tools is None else tools, sandbox=sandbox, artifacts=artifacts,
                       model_name=model_name, settings=settings, strategy=agent_strategy(factory, model_name))


__all__ = ["AGENT_PREFIX", "AgentFactory", "episode_tools", "load_agent_factory", "run_agent_episode"]
