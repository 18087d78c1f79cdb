"""The state of an agent graph and the per-episode runtime context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.tools.sandbox.base import Sandbox

DEFAULT_MAX_TOOL_ROUNDS = 20
DEFAULT_MAX_IMAGE_SIDE = 2048

TurnOutcome = Literal["running", "answered", "tool_round_cap"]


class TurnInput(TypedDict, total=False):
    """What a turn starts from: new messages (the user's turn), its index and the task's turn count."""

    messages: list[AnyMessage]
    turn: int
    num_turns: int
    tool_rounds: int
    status: TurnOutcome


class AgentState(TypedDict, total=False):
    """Messages (images as artifact references), the turn, its tool rounds and how it ended."""

    messages: Annotated[list[AnyMessage], add_messages]
    turn: int
    num_turns: int
    tool_rounds: int
    status: TurnOutcome


class TurnOutput(TypedDict, total=False):
    """What a turn leaves: the whole conversation so far and how the turn ended."""

    messages: list[AnyMessage]
    turn: int
    tool_rounds: int
    status: TurnOutcome


@dataclass
class EpisodeContext:
    """Per-episode resources handed to the graph as LangGraph runtime context (never checkpointed).

    ``model`` is the chat model before tools are bound (the graph binds its own tools).
    ``native_tool_images`` puts new images inside the tool results (Responses API, Anthropic)
    instead of one user message after them.
    """

    model: BaseChatModel
    sandbox: Sandbox
    artifacts: ArtifactStore
    system_prompt: str
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    max_image_side: int = DEFAULT_MAX_IMAGE_SIDE
    code_timeout_s: float = 60.0
    native_tool_images: bool = False
