"""The strategy contract: what answers one turn of a task.

A :class:`Strategy` is a named factory of a *turn graph*: a compiled LangGraph graph whose input is
``{"messages": [...], "tool_rounds": 0}`` (the conversation so far, ending with the turn's user
message), whose output is ``{"messages": [...], "status": ...}`` (the conversation with the turn's
answer) and whose runtime context is an :class:`EpisodeContext`: the episode's model, its tools
(already bound to the task's sandbox), the system prompt of the chosen prompt level and the limits.
The episode driver and the category graphs do everything else (turns, images entering the sandbox,
clarification, history), the same way for every strategy, a user's own agent included.

Example: a strategy that answers with one model call and no tools::

    from langgraph.graph import START, StateGraph
    from vtb_agents.strategies import EpisodeContext, Strategy, TurnState, TurnInput, TurnOutput

    def answer(state: TurnState, runtime) -> dict:
        ctx = runtime.context
        reply = ctx.model.invoke([SystemMessage(ctx.system_prompt), *ctx.materialize(state["messages"])])
        return {"messages": [reply], "status": "answered"}

    def build():
        graph = StateGraph(TurnState, context_schema=EpisodeContext, input_schema=TurnInput,
                           output_schema=TurnOutput)
        graph.add_node("answer", answer)
        graph.add_edge(START, "answer")
        return graph.compile(name="direct")

    direct = Strategy(name="direct", summary="one model call, no tools", build=build)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Literal, Sequence, TypeAlias

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.tools import BaseTool
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S, DEFAULT_MAX_IMAGE_SIDE, DEFAULT_MAX_TOOL_ROUNDS
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.strategies.observe import materialize_messages


TurnOutcome = Literal["running", "answered", "tool_round_cap"]


class TurnInput(TypedDict, total=False):
    """What a turn graph starts from: the conversation so far (ending with the turn's user message)."""

    messages: list[AnyMessage]
    tool_rounds: int
    status: TurnOutcome


class TurnState(TypedDict, total=False):
    """A turn graph's state: messages (images as artifact references), tool rounds, how it ended."""

    messages: Annotated[list[AnyMessage], add_messages]
    tool_rounds: int
    status: TurnOutcome


class TurnOutput(TypedDict, total=False):
    """What a turn graph leaves: the conversation with the turn's answer, and how the turn ended."""

    messages: list[AnyMessage]
    tool_rounds: int
    status: TurnOutcome


@dataclass
class EpisodeContext:
    """Per-episode resources handed to every graph as LangGraph runtime context (never checkpointed).

    ``model`` is the chat model before tools are bound (None for a user's agent, which brings its
    own); ``tools`` are the episode's tools, bound to ``sandbox``. ``native_tool_images`` puts new
    images inside the tool results (Responses API, Anthropic) instead of one user message after
    them. ``prompt_cache`` marks each request's stable prefix for the provider's prompt cache
    (:mod:`vtb_agents.models.prompt_cache`). ``scratch`` is per-episode memory for a strategy (for
    example a user's agent, built once).
    """

    model: BaseChatModel | None
    sandbox: Sandbox
    artifacts: ArtifactStore
    system_prompt: str
    tools: list[BaseTool] = field(default_factory=list)
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    max_image_side: int = DEFAULT_MAX_IMAGE_SIDE
    code_timeout_s: float = DEFAULT_CODE_TIMEOUT_S
    native_tool_images: bool = False
    prompt_cache: bool = True
    scratch: dict[str, Any] = field(default_factory=dict)

    def materialize(self, messages: list[AnyMessage]) -> list[AnyMessage]:
        """``messages`` with image references turned into (downscaled) image blocks for a model call."""
        return materialize_messages(messages, self.artifacts, self.max_image_side)

    def tool(self, name: str) -> BaseTool | None:
        """The episode's tool called ``name``, if it has one."""
        return next((t for t in self.tools if t.name == name), None)


TurnGraph: TypeAlias = "CompiledStateGraph[TurnState, EpisodeContext, TurnInput, TurnOutput]"


def as_node(function: Callable[..., dict[str, Any]]) -> Any:
    """``function`` for ``StateGraph.add_node``, typed ``Any``: LangGraph passes ``config`` and ``runtime``
    by parameter name, but its node protocols have no signature taking both, so the type checker is told
    here, once, rather than by an ignore at every such node."""
    return function


@dataclass(frozen=True)
class Strategy:
    """A named turn policy: ``build()`` compiles its turn graph (once per process and run).

    ``source`` says which paper or practice it follows; ``needs_model`` is False for strategies that
    bring their own model (a user's agent). ``check``, if any, is called once before a run's first
    task with the run's tools (unbound) and system prompt, and raises ValueError naming what keeps
    the strategy from answering with them (a user's agent that cannot be given the tools).
    """

    name: str
    summary: str
    build: Callable[[], TurnGraph]
    source: str = ""
    needs_model: bool = True
    check: Callable[[Sequence[BaseTool], str], None] | None = None
