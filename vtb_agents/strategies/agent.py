"""Your own LangChain agent as a strategy: the adapter behind ``--model agent:module:attr`` and
``evaluate(agent=...)``.

Your agent is one of two things:

- An *agent factory* (preferred): it receives the episode's tools (bound to that task's sandbox)
  and returns any Runnable mapping ``{"messages": [...]}`` to ``{"messages": [...]}`` (or a message
  list), such as ``langchain.agents.create_agent(model, tools)``. It is called once per episode and
  answers each turn with the whole conversation so far, like our own strategies. It keeps the
  run's limits and gets the built-in loop's tool descriptions: its tools and callbacks come from
  :class:`~vtb_agents.strategies.agent_limits.AgentLimits`.
- A *ready* Runnable (a compiled graph such as ``create_agent(...)``'s): it cannot be given tools
  afterwards, so it runs with the tools it was built with. It must hold exactly the run's tools, by
  name, in its ``ToolNode`` nodes (:func:`agent_tool_names`), or the run refuses it before the first
  task naming the tools it lacks and those the run does not offer: with the built-in tools that
  means passing a factory instead; a ready agent fits a run of your own tools only
  (``evaluate(agent=graph, tools=[...], no_tools=True)``). Its own tool objects run, not the
  episode's, so the round cap ends its turn at the next model reply with tool calls instead of
  answering calls past the cap with the notice.

What a factory may also take, by keyword:

- ``system_prompt``: the system prompt of the run's ``--prompt-level``. A factory without this
  parameter (and a ready agent) gets the prompt as a leading SystemMessage of every request
  instead, so the prompt level always reaches the agent.
- ``middleware``: a list holding :class:`ShowToolImages`, a ``create_agent`` middleware that
  shows the images the tools saved in a round to the model after that round's tool results (the
  observation rule), as our own graphs do. Pass it to ``create_agent(..., middleware=middleware)``.
  Agents that are not built with ``create_agent`` can apply :func:`show_tool_images` to the
  messages of each model request themselves. A factory that takes neither is warned about once,
  when the run checks it (:func:`check_agent`).

Example:
    >>> from langchain.agents import create_agent
    >>> def build(tools, *, system_prompt, middleware):  # doctest: +SKIP
    ...     return create_agent("openai:gpt-4o", tools, system_prompt=system_prompt, middleware=middleware)
    >>> # vtb run --model agent:my_module:build
"""

from __future__ import annotations

import inspect
import logging
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.graph import START
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.defaults import DEFAULT_MAX_IMAGE_SIDE, AgentSpec
from vtb_agents.extensions import load_object
from vtb_agents.models.deadline import within_task_limit
from vtb_agents.strategies.agent_limits import AgentLimits, RoundCapReached
from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnState, as_node
from vtb_agents.strategies.observe import materialize_messages, show_tool_images
from vtb_agents.strategies.react import turn_graph_builder

AgentFactory = Callable[..., Runnable]
AgentLike = Runnable[Any, Any] | AgentFactory
"""Your agent: a ready Runnable (a compiled graph) or a factory of one (see the module docstring)."""
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


def load_agent(spec: str) -> AgentLike:
    """Import ``agent:package.module:attr`` (decoded by :meth:`AgentSpec.parse`) and return the agent
    it names: a Runnable or a factory of one. Anything that fails, the module raising as it imports
    included, raises ValueError naming the spec and the cause."""
    agent = AgentSpec.parse(spec)
    if agent is None:
        raise ValueError(f"agent spec {spec!r} must look like 'agent:package.module:function'")
    target = load_object("agent spec", agent.target, shown=spec)
    if not isinstance(target, Runnable) and not callable(target):
        raise ValueError(f"agent spec {spec!r}: {agent.target} is a {type(target).__name__}, neither a Runnable "
                         "(a compiled graph) nor a factory of one")
    return target


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


def build_agent(factory: AgentFactory, tools: Sequence[BaseTool], takes: set[str], system_prompt: str,
                artifacts: ArtifactStore, max_image_side: int = DEFAULT_MAX_IMAGE_SIDE) -> Runnable:
    """The user's agent for one episode from its factory, given what the factory ``takes``
    (:func:`factory_keywords`): ``tools``, and by keyword the system prompt and the middleware that
    shows tool images from ``artifacts``. TypeError if it returns no Runnable."""
    options: dict[str, Any] = {}
    if "system_prompt" in takes:
        options["system_prompt"] = system_prompt
    if "middleware" in takes:
        options["middleware"] = [ShowToolImages(artifacts, max_image_side)]
    agent = factory(list(tools), **options)
    if not isinstance(agent, Runnable):
        raise TypeError(f"the agent factory returned a {type(agent).__name__}, not a Runnable (a compiled graph, "
                        "create_agent(...))")
    return agent


def agent_tool_names(agent: Runnable[Any, Any]) -> set[str]:
    """The names of the tools a ready agent holds: those of the ``ToolNode`` nodes of a compiled graph
    and of its subgraphs (``create_agent``'s ``tools`` node); none for any other Runnable, whose
    tools cannot be seen."""
    if not isinstance(agent, Pregel):
        return set()
    graphs = [agent, *(graph for _, graph in agent.get_subgraphs(recurse=True) if isinstance(graph, Pregel))]
    return {name for graph in graphs for node in graph.nodes.values() if isinstance(node.bound, ToolNode)
            for name in node.bound.tools_by_name}


def ready_agent_problem(agent: Runnable[Any, Any], tools: Sequence[BaseTool]) -> str | None:
    """Why a ready agent cannot answer in a run whose tools are ``tools`` (None if it can): it must hold
    exactly those tools, by name, since a compiled graph cannot be given tools afterwards."""
    held, offered = agent_tool_names(agent), {t.name for t in tools}
    lacks, extra = sorted(offered - held), sorted(held - offered)
    if not lacks and not extra:
        return None
    problems = [*([f"lacks the run's tools {', '.join(lacks)}"] if lacks else []),
                *([f"has tools the run does not offer: {', '.join(extra)}"] if extra else [])]
    return (f"a ready {type(agent).__name__} cannot be given the episode's tools, and this one "
            f"{'; it '.join(problems)}. Pass a factory instead (a function taking the tools and returning "
            "the agent, e.g. create_agent(model, tools)), or run it with exactly its own tools "
            "(evaluate(agent=..., tools=[...], no_tools=True))")


def check_agent(agent: AgentLike, name: str, tools: Sequence[BaseTool], system_prompt: str) -> None:
    """Check ``agent`` (named ``name``) against the adapter's contract for a run offering ``tools``,
    before the run: a ready Runnable must hold exactly those tools (:func:`ready_agent_problem`); a
    factory is called once with them and must return a Runnable. ValueError names the agent and the
    cause. A factory taking no ``middleware`` is warned about here, once per run."""
    if isinstance(agent, Runnable):
        problem = ready_agent_problem(agent, tools)
        if problem is not None:
            raise ValueError(f"agent {name!r}: {problem}")
        return
    takes = factory_keywords(agent)
    with tempfile.TemporaryDirectory(prefix="vtb-agent-check-") as scratch:
        try:
            build_agent(agent, tools, takes, system_prompt, ArtifactStore(Path(scratch)))
        except Exception as exc:  # the user's factory: its failure refuses the run, naming it
            raise ValueError(f"agent {name!r}: its factory failed when called with the run's tools: "
                             f"{type(exc).__name__}: {exc}") from exc
    if tools and "middleware" not in takes:
        log.warning("agent %s: its factory takes no 'middleware': images its tool calls save are not shown to it "
                    "(see vtb_agents.strategies.agent)", name)


def returned_messages(output: Any) -> list[AnyMessage]:
    """The messages an agent returned (``{"messages": [...]}`` or a list)."""
    messages = output.get("messages") if isinstance(output, dict) else output
    if not isinstance(messages, list) or not all(isinstance(m, BaseMessage) for m in messages):
        raise TypeError(f"the agent must return messages or {{'messages': [...]}}, got {type(output).__name__}")
    return messages


def agent_strategy(agent: AgentLike, name: str) -> Strategy:
    """The adapter strategy around ``agent`` (a ready Runnable or a factory of one): one node that runs
    the user's agent for the turn. Its ``check`` is :func:`check_agent`."""
    ready: Runnable[Any, Any] | None = agent if isinstance(agent, Runnable) else None
    factory: AgentFactory | None = None if isinstance(agent, Runnable) else agent
    takes = factory_keywords(factory) if factory is not None else set()

    def answer(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
        ctx = runtime.context
        if "agent" not in ctx.scratch:  # built once per episode, with its tools bound to this sandbox
            fresh = ctx.scratch["limits"] = AgentLimits(ctx)
            if factory is not None:
                ctx.scratch["agent"] = build_agent(factory, fresh.tools, takes, ctx.system_prompt, ctx.artifacts,
                                                   ctx.max_image_side)
            elif ready is not None:  # a run not checked beforehand (Studio) is refused here, by the same rule
                problem = ready_agent_problem(ready, ctx.tools)
                if problem is not None:
                    raise ValueError(f"agent {name!r}: {problem}")
                ctx.scratch["agent"] = ready
        limits: AgentLimits = ctx.scratch["limits"]
        limits.start_turn()
        sent = ctx.materialize(state["messages"])
        if "system_prompt" not in takes:
            sent = [SystemMessage(ctx.system_prompt, id="vtb-system"), *sent]
        known = {m.id for m in sent}
        agent, agent_config = ctx.scratch["agent"], merge_configs(config, {"callbacks": [limits]})
        try:  # ended at the task's time limit, even while the agent's own model client waits past it
            returned = returned_messages(within_task_limit(lambda: agent.invoke({"messages": sent}, agent_config),
                                                           config, name="vtb-agent"))
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

    def check(tools: Sequence[BaseTool], system_prompt: str) -> None:
        check_agent(agent, name, tools, system_prompt)

    return Strategy(name=name, summary="your own LangChain agent (a Runnable or a factory of one)", build=build,
                    source="user code", needs_model=False, check=check)
