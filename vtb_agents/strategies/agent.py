"""Your own LangChain agent as a strategy: the adapter behind ``--model agent:module:function``.

An *agent factory* receives the episode's tools (bound to that task's sandbox) and returns any
Runnable mapping ``{"messages": [...]}`` to ``{"messages": [...]}`` (or a message list), such as
``langchain.agents.create_agent(model, tools)`` or a compiled LangGraph graph. It is called once
per episode and answers each turn with the whole conversation so far, like our own strategies.
It keeps the run's limits and gets the built-in loop's tool descriptions: its tools and callbacks
come from :class:`~vtb_agents.strategies.agent_limits.AgentLimits`.

What the factory may also take, by keyword:

- ``system_prompt``: the system prompt of the run's ``--prompt-level``. A factory without this
  parameter gets the prompt as a leading SystemMessage of every request instead, so the prompt
  level always reaches the agent.
- ``middleware``: a list holding :class:`ShowToolImages`, a ``create_agent`` middleware that
  shows the images the tools saved in a round to the model after that round's tool results (the
  observation rule), as our own graphs do. Pass it to ``create_agent(..., middleware=middleware)``.
  Agents that are not built with ``create_agent`` can apply :func:`show_tool_images` to the
  messages of each model request themselves.

Example:
    >>> from langchain.agents import create_agent
    >>> def build(tools, *, system_prompt, middleware):  # doctest: +SKIP
    ...     return create_agent("openai:gpt-4o", tools, system_prompt=system_prompt, middleware=middleware)
    >>> # vtb run --model agent:my_module:build
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any, Awaitable, Callable, Sequence

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.graph import START
from langgraph.runtime import Runtime

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.defaults import AgentSpec
from vtb_agents.strategies.agent_limits import AgentLimits, RoundCapReached
from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnState, as_node
from vtb_agents.strategies.observe import materialize_messages, show_tool_images
from vtb_agents.strategies.react import turn_graph_builder

AgentFactory = Callable[..., Runnable]
log = logging.getLogger(__name__)


class ShowToolImages(AgentMiddleware):
    """``create_agent`` middleware: each model request shows the images saved by tool calls.

    The agent's own state is left as it is; every request gets one user message with a round's
    images after that round's tool results, and image references become (downscaled) image blocks.
    """

    def __init__(self, artifacts: ArtifactStore, max_image_side: int) -> None:
        super().__init__()
        self.artifacts, self.max_image_side = artifacts, max_image_side

    def _prepared(self, request: ModelRequest) -> ModelRequest:
        shown = materialize_messages(show_tool_images(request.messages), self.artifacts, self.max_image_side)
        return request.override(messages=shown)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(self._prepared(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        return await handler(self._prepared(request))


def load_agent_factory(spec: str) -> AgentFactory:
    """Import ``agent:package.module:function`` (decoded by :meth:`AgentSpec.parse`) and return the
    factory it names."""
    agent = AgentSpec.parse(spec)
    if agent is None:
        raise ValueError(f"agent spec {spec!r} must look like 'agent:package.module:function'")
    try:
        factory = getattr(importlib.import_module(agent.module), agent.function)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent spec {spec!r}: cannot load {agent.target}: {exc}") from exc
    if not callable(factory):
        raise ValueError(f"agent spec {spec!r}: {agent.target} is not callable")
    return factory


def factory_keywords(factory: AgentFactory) -> set[str]:
    """Which of ``system_prompt`` and ``middleware`` the factory takes by keyword."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return set()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return {"system_prompt", "middleware"}
    return {p.name for p in parameters if p.name in {"system_prompt", "middleware"}
            and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}


def build_agent(factory: AgentFactory, ctx: EpisodeContext, takes: set[str],
                tools: Sequence[BaseTool] | None = None) -> Runnable:
    """The user's agent for one episode, given what its factory ``takes`` (:func:`factory_keywords`);
    ``tools`` are what it gets (default: the episode's)."""
    options: dict[str, Any] = {}
    if "system_prompt" in takes:
        options["system_prompt"] = ctx.system_prompt
    if "middleware" in takes:
        options["middleware"] = [ShowToolImages(ctx.artifacts, ctx.max_image_side)]
    elif ctx.tools:
        log.warning("the agent factory takes no 'middleware': images its tool calls save are not shown to it "
                    "(see vtb_agents.strategies.agent)")
    return factory(list(ctx.tools if tools is None else tools), **options)


def returned_messages(output: Any) -> list[AnyMessage]:
    """The messages an agent returned (``{"messages": [...]}`` or a list)."""
    messages = output.get("messages") if isinstance(output, dict) else output
    if not isinstance(messages, list) or not all(isinstance(m, BaseMessage) for m in messages):
        raise TypeError(f"the agent must return messages or {{'messages': [...]}}, got {type(output).__name__}")
    return messages


def agent_strategy(factory: AgentFactory, name: str) -> Strategy:
    """The adapter strategy around ``factory``: one node that runs the user's agent for the turn."""

    takes = factory_keywords(factory)

    def answer(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
        ctx = runtime.context
        if "agent" not in ctx.scratch:  # built once per episode, with its tools bound to this sandbox
            ctx.scratch["limits"] = AgentLimits(ctx)
            ctx.scratch["agent"] = build_agent(factory, ctx, takes, ctx.scratch["limits"].tools)
        limits: AgentLimits = ctx.scratch["limits"]
        limits.start_turn()
        sent = ctx.materialize(state["messages"])
        if "system_prompt" not in takes:
            sent = [SystemMessage(ctx.system_prompt, id="vtb-system"), *sent]
        known = {m.id for m in sent}
        try:
            returned = returned_messages(ctx.scratch["agent"].invoke(
                {"messages": sent}, merge_configs(config, {"callbacks": [limits]})))
        except RoundCapReached:
            if limits.stopped is None:
                raise
            returned = []  # the agent's run ended at the cap: the turn's messages are what limits saw
        new = limits.stopped if limits.stopped is not None else [
            m for m in returned if m.id is None or m.id not in known]
        rounds = sum(1 for m in new if isinstance(m, AIMessage) and m.tool_calls)
        return {"messages": new, "tool_rounds": state.get("tool_rounds", 0) + rounds,
                "status": "tool_round_cap" if limits.capped else "answered"}

    def build() -> TurnGraph:
        builder = turn_graph_builder()
        builder.add_node("agent", as_node(answer))
        builder.add_edge(START, "agent")
        return builder.compile(name="agent")

    return Strategy(name=name, summary="your own LangChain agent (a factory of a Runnable)", build=build,
                    source="user code", needs_model=False)
