"""Run any LangChain agent on VisualToolBench tasks and grade it like ours.

An *agent factory* takes the tools of one episode (bound to that task's sandbox) and returns a
Runnable that maps ``{"messages": [...]}`` to ``{"messages": [...]}`` (or a message list), such as
``langchain.agents.create_agent(model, tools)`` or any compiled LangGraph graph. The final answer
of each turn and the tool trace are read back from the returned messages.

Example:
    >>> from langchain.agents import create_agent
    >>> def build(tools):  # doctest: +SKIP
    ...     return create_agent("openai:gpt-4o", tools)
    >>> # vtb run --model agent:my_module:build
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Literal, Sequence

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.graphs.deadline import task_time_limit
from vtb_agents.graphs.partial import keeping_partial
from vtb_agents.graphs.episode import golden_rewrite, turn_message, turn_record
from vtb_agents.graphs.materialize import materialize_messages
from vtb_agents.results import Episode
from vtb_agents.tasks.model import Task
from vtb_agents.tools import guard_tools, select_tools
from vtb_agents.tools.python_tools import bound_code_tools
from vtb_agents.tools.sandbox.base import Sandbox, sandbox_settings

AGENT_PREFIX = "agent:"
AgentFactory = Callable[[list[BaseTool]], Runnable]


def episode_tools(sandbox: Sandbox, artifacts: ArtifactStore, *, timeout_s: float = 60.0,
                  no_vision_tool: bool = False, shared: Sequence[BaseTool] | None = None) -> list[BaseTool]:
    """The VTB tools bound to one task's sandbox, ready for any LangChain agent.

    ``shared`` are the run's tools that need no sandbox (calculator, network tools); by default
    :func:`~vtb_agents.tools.select_tools` builds them with live network settings.
    """
    code_names = {"python_image_processing", "python_interpreter"}
    code_tools = guard_tools([t for t in bound_code_tools(sandbox, artifacts, timeout_s)
                              if not (no_vision_tool and t.name == "python_image_processing")])
    others = select_tools() if shared is None else shared
    return code_tools + [t for t in others if t.name not in code_names]


def load_agent_factory(spec: str) -> AgentFactory:
    """Import ``agent:package.module:function`` and return the factory it names."""
    target = spec[len(AGENT_PREFIX):] if spec.startswith(AGENT_PREFIX) else spec
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"agent spec {spec!r} must look like 'agent:package.module:function'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent spec {spec!r}: cannot load {target}: {exc}") from exc
    if not callable(factory):
        raise ValueError(f"agent spec {spec!r}: {target} is not callable")
    return factory


def _returned_messages(output: Any) -> list[AnyMessage]:
    messages = output.get("messages") if isinstance(output, dict) else output
    if not isinstance(messages, list) or not all(isinstance(m, BaseMessage) for m in messages):
        raise TypeError(f"the agent must return messages or {{'messages': [...]}}, got {type(output).__name__}")
    return messages


def run_agent_episode(task: Task, factory: AgentFactory, *, sandbox: Sandbox, artifacts: ArtifactStore,
                      model_name: str, history: Literal["golden", "model"] = "golden", max_image_side: int = 2048,
                      tools: Sequence[BaseTool] | None = None, config: dict[str, Any] | None = None,
                      task_timeout_s: float | None = None) -> Episode:
    """Run every turn of ``task`` with the user's agent and return an episode to grade.

    ``task_timeout_s`` limits the whole episode: checked at every step of the agent (a LangChain
    callback, see :mod:`vtb_agents.graphs.deadline`), and the sandbox closes when it passes.
    """
    agent = factory(list(tools) if tools is not None else episode_tools(sandbox, artifacts))
    episode = Episode(task_id=task.id, model=model_name, settings={
        "agent": model_name, "history": history, **sandbox_settings(sandbox)})
    config = config or {"run_name": f"vtb:{task.id}", "tags": [task.category, task.domain, model_name]}
    with keeping_partial(episode), task_time_limit(task_timeout_s, sandbox, config) as limited:
        _drive_agent(task, agent, limited, sandbox, artifacts, history, max_image_side, episode)
    return episode


def _drive_agent(task: Task, agent: Runnable, config: dict[str, Any], sandbox: Sandbox,
                 artifacts: ArtifactStore, history: Literal["golden", "model"], max_image_side: int,
                 episode: Episode) -> None:
    """Feed the turns to ``agent`` and record each turn in ``episode``."""
    conversation: list[AnyMessage] = []
    for turn in range(len(task.turns)):
        opening = materialize_messages([turn_message(task, turn, sandbox, artifacts)], artifacts, max_image_side)[0]
        returned = _returned_messages(agent.invoke({"messages": [*conversation, opening]}, config))
        if not any(m.id == opening.id for m in returned):
            returned = [*conversation, opening, *returned]  # agents that return only their new messages
        episode.turns.append(turn_record(returned, turn, "answered"))
        conversation = returned
        if history == "golden":  # replace the final answer (or add one) as in our own graphs
            rewrite = golden_rewrite(returned[-1], task.turns[turn].golden_answer)[0]
            replaced = rewrite.id is not None
            conversation = [*returned[:-1], rewrite] if replaced else [*returned, rewrite]
