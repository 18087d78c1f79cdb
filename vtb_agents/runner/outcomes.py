"""Name how a failed episode ended: the model's doing (graded) or the infrastructure's (ungraded).

``classify_failure(exc)`` maps what escaped an episode to an outcome of the fixed vocabulary in
:mod:`vtb_agents.results` (docs/concepts/outcomes.md):

- ``task_timeout``: the task ran past ``--task-timeout`` (``TaskTimeout`` anywhere in the chain of
  causes, since stopping the sandbox at the limit makes the running call fail first), unless the
  provider gave no answer within the time given: then ``provider_error``;
- ``step_limit``: the graph's recursion limit (an agent that kept stepping without ending its turn);
- ``token_limit``: the task's model calls used more tokens than ``--task-token-limit``
  (:class:`~vtb_agents.models.usage.TokenLimitReached`);
- ``context_exceeded``: the provider rejected a request as longer than the model's context window;
- ``provider_error``: the model provider failed after its retries (HTTP status, connection,
  HTTP timeout, malformed responses);
- ``sandbox_error``: the sandbox could not start or could not be restarted;
- ``storage_error``: the disk failed (an ``OSError`` carrying an errno, SQLite errors);
- ``harness_error``: anything else, a fault of this harness rather than of the model.

Whose doing a timeout or a provider's rejection is, is decided in :mod:`vtb_agents.models.blame`.

Tool errors never get here: every tool's exceptions become error tool messages
(:mod:`vtb_agents.tools.guard`), and the model reads them like any observation.
"""

from __future__ import annotations

import sqlite3
import traceback
from collections.abc import Iterator

from langgraph.errors import GraphRecursionError

from vtb_agents.graphs.partial import partial_episode
from vtb_agents.models.blame import provider_outcome, timeout_outcome
from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.usage import TokenLimitReached
from vtb_agents.results import Episode, Outcome
from vtb_agents.sandbox import SandboxError

_ERROR_CHARS = 2_000
_TRACEBACK_FRAMES = 8
"""Frames kept of each exception's traceback: the innermost ones, where it was raised."""
_TRACEBACK_CHARS = 20_000


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes / contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def classify_failure(exc: BaseException) -> Outcome:
    """The outcome of an episode that raised ``exc`` (see the module docstring)."""
    chain = list(_chain(exc))
    timeout = next((e for e in chain if isinstance(e, TaskTimeout)), None)
    if timeout is not None:
        return timeout_outcome(timeout)
    for error in chain:
        if isinstance(error, GraphRecursionError):
            return "step_limit"
        if isinstance(error, TokenLimitReached):
            return "token_limit"
        provider = provider_outcome(error)
        if provider is not None:
            return provider
        if isinstance(error, SandboxError):
            return "sandbox_error"
        if isinstance(error, sqlite3.Error) or (isinstance(error, OSError) and error.errno is not None):
            return "storage_error"
    return "harness_error"


def failed_episode(task_id: str, model: str, exc: BaseException) -> Episode:
    """The record of an episode that raised ``exc``: the turns it finished (if the driver kept
    them), its outcome, a one-line error and a short traceback (the innermost frames of each
    exception in the chain, and at most its last 20,000 characters)."""
    kept = partial_episode(exc)
    episode = kept.model_copy(deep=True) if kept is not None else Episode(task_id=task_id, model=model)
    episode.status = "error"
    episode.outcome = classify_failure(exc)
    episode.error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
    trace = "".join(traceback.format_exception(exc, limit=-_TRACEBACK_FRAMES))
    episode.traceback = trace[-_TRACEBACK_CHARS:]
    return episode
