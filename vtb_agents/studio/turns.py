"""The node Studio's chat graphs answer a turn with: the category graph of ``vtb run``, as a subgraph.

The node resolves the run's :class:`~vtb_agents.config.RunConfig` context into the live
:class:`~vtb_agents.strategies.base.EpisodeContext` (model, the thread's sandbox and artifacts,
tools bound to them, system prompt, limits) and invokes the category graph around the context's
strategy with it, passing the run's config so that Studio streams and checkpoints it as a subgraph.
The category graph is told the turn is its last, so it answers and never interrupts itself: a
chat graph asks the user in its own ``ask`` node, whose reply is plain text (see
:mod:`vtb_agents.studio.chat`). The task graph runs the episode driver instead
(:mod:`vtb_agents.studio.task`), using :func:`live_context` and :func:`thread_id` from here.
"""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from vtb_agents.episodes.driver import episode_context
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.runner.resources import RunResources
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.loop import recursion_limit
from vtb_agents.strategies.react import react
from vtb_agents.config import RunConfig
from vtb_agents.studio.context import context_of, resources_for
from vtb_agents.studio.inputs import thread_images
from vtb_agents.studio.sessions import SESSIONS, Session
from vtb_agents.tasks.model import Task

DEFAULT_THREAD = "default"


def thread_id(config: RunnableConfig) -> str:
    """The LangGraph thread a run belongs to (the server always gives one)."""
    return str(config.get("configurable", {}).get("thread_id") or DEFAULT_THREAD)


def turn_model(resources: RunResources, task: Task | None) -> BaseChatModel | None:
    """The model answering ``task`` (None for a user's agent, which brings its own). Chat graphs
    have no task: their model spec is a provider's (``resources_for`` refused ``replay``)."""
    if resources.models is None:
        return None
    return resources.models(task)  # type: ignore[arg-type]  # only the replay factory reads the task


def reply_message(reply: Any, what: str) -> HumanMessage:
    """The user message of a resume value: text, a message object, or a list of content blocks."""
    if isinstance(reply, str) and reply.strip():
        return HumanMessage(reply)
    if isinstance(reply, list) and reply:
        return HumanMessage(content=reply)
    if isinstance(reply, dict):
        message = convert_to_messages([reply])[0]
        if isinstance(message, HumanMessage):
            return message
    raise ValueError(f"{what}: resume with your reply as text, a user message or a list of content blocks")


def make_turn_node(category: str) -> Callable[..., dict[str, Any]]:
    """The chat graph's ``turn`` node: one turn through the category graph of ``category``.

    The graph around the default strategy is compiled here, so Studio draws it inside the node;
    another strategy's graph is compiled once per run context.
    """
    drawn = build_category_graph(category)

    def turn(state: dict[str, Any], config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
        ctx = context_of(runtime.context)
        resources = resources_for(ctx, chat=True)
        graph = drawn if resources.strategy is react else resources.graph(category)
        messages: list[AnyMessage] = state["messages"]
        with SESSIONS.use(thread_id(config), ctx.sandbox, resources.open_sandbox, thread_images(messages)) as session:
            out = graph.invoke(
                {"messages": messages, "turn": state.get("turn", 0), "num_turns": state.get("turn", 0) + 1,
                 "tool_rounds": 0, "status": "running"},
                config | {"recursion_limit": recursion_limit(ctx.episode.max_tool_rounds)},
                context=live_context(ctx, resources, session, None),
            )
        return {"messages": out["messages"], "status": out.get("status", "answered")}

    return turn


def live_context(ctx: RunConfig, resources: RunResources, session: Session, task: Task | None) -> EpisodeContext:
    """The episode context of one Studio turn: ``ctx``'s model, tools and limits, on ``session``."""
    return episode_context(turn_model(resources, task), resources.tools, session.sandbox, session.artifacts,
                           ctx.episode)
