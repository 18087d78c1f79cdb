"""The state of a category graph: a turn graph's state plus where the episode is in its turns."""

from __future__ import annotations

from langchain_core.messages import AnyMessage
from typing_extensions import TypedDict

from vtb_agents.strategies.base import (
    DEFAULT_MAX_IMAGE_SIDE,
    DEFAULT_MAX_TOOL_ROUNDS,
    EpisodeContext,
    TurnOutcome,
    TurnState,
)


class EpisodeInput(TypedDict, total=False):
    """What a turn starts from: new messages (the user's turn), its index and the task's turn count."""

    messages: list[AnyMessage]
    turn: int
    num_turns: int
    tool_rounds: int
    status: TurnOutcome


class EpisodeState(TurnState, total=False):
    """Messages (images as artifact references), the turn, its tool rounds and how it ended."""

    turn: int
    num_turns: int


class EpisodeOutput(TypedDict, total=False):
    """What a turn leaves: the whole conversation so far and how the turn ended."""

    messages: list[AnyMessage]
    turn: int
    tool_rounds: int
    status: TurnOutcome


__all__ = ["DEFAULT_MAX_IMAGE_SIDE", "DEFAULT_MAX_TOOL_ROUNDS", "EpisodeContext", "EpisodeInput", "EpisodeOutput",
           "EpisodeState"]
