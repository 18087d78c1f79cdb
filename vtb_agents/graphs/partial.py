"""Keep what an episode did before it failed: the turns it finished stay on record.

The episode drivers fill ``episode.turns`` turn by turn; ``keeping_partial(episode)`` attaches the
episode to any exception leaving the block, and ``partial_episode(exc)`` gives it back to the
runner, which records those turns (a task timeout in turn 3 keeps turns 1 and 2 to be graded).

Example:
    >>> from vtb_agents.results import Episode
    >>> episode = Episode(task_id="t", model="m")
    >>> try:
    ...     with keeping_partial(episode):
    ...         raise TimeoutError("late")
    ... except TimeoutError as exc:
    ...     partial_episode(exc) is episode
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vtb_agents.results import Episode

_ATTRIBUTE = "vtb_partial_episode"


@contextmanager
def keeping_partial(episode: Episode) -> Iterator[Episode]:
    """Run the block; an exception leaving it carries ``episode`` (see :func:`partial_episode`)."""
    try:
        yield episode
    except BaseException as exc:
        if getattr(exc, _ATTRIBUTE, None) is None:  # the innermost driver's record wins
            setattr(exc, _ATTRIBUTE, episode)
        raise


def partial_episode(exc: BaseException) -> Episode | None:
    """The episode an exception left behind (with the turns finished before it), if any."""
    found = getattr(exc, _ATTRIBUTE, None)
    return found if isinstance(found, Episode) else None
