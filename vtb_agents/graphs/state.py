"""The state of a category graph: a turn graph's state plus where the episode is in its turns."""

from __future__ import annotations

from vtb_agents.strategies.base import EpisodeContext, TurnInput, TurnOutput, TurnState


class EpisodeInput(TurnInput, total=False):
    """What a turn starts from: new messages (the user's turn), its index and the task's turn count."""

    turn: int
    num_turns: int


class EpisodeState(TurnState, total=False):
    """Messages (images as artifact references), the turn, its tool rounds and how it ended."""

    turn: int
    num_turns: int


class EpisodeOutput(TurnOutput, total=False):
    """What a turn leaves: the whole conversation so far, how the turn ended and its index."""

    turn: int


__all__ = ["EpisodeContext", "EpisodeInput", "EpisodeOutput", "EpisodeState"]
