"""Name how a failed episode ended: the model's doing (graded) or the infrastructure's (ungraded).

``classify_failure(exc)`` maps what escaped an episode to an outcome of the fixed vocabulary in
:mod:`vtb_agents.results` (README "Outcomes"):

- ``task_timeout``: the task ran past ``--task-timeout`` (``TaskTimeout`` anywhere in the chain of
  causes, since stopping the sandbox at the limit makes the running call fail first);
- ``step_limit``: the graph's recursion limit (the model kept going past what the round cap allows);
- ``provider_error``: the model provider failed after its retries (HTTP status, connection,
  HTTP timeout, malformed responses);
- ``sandbox_error``: the sandbox could not start or could not be restarted;
- ``storage_error``: the disk failed (an ``OSError`` carrying an errno, SQLite errors);
- ``harness_error``: anything else, a fault of this harness rather than of the model.

Tool errors never get here: every tool's exceptions become error tool messages
(:mod:`vtb_agents.tools.guard`), and the model reads them like any observation.
"""

from __future__ import annotations

import sqlite3
import traceback
from collections.abc import Iterator

import httpx
from langgraph.errors import GraphRecursionError

from vtb_agents.graphs.partial import partial_episode
from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.http import MalformedResponse
from vtb_agents.results import Episode, Outcome
from vtb_agents.sandbox import SandboxError

_PROVIDER_ERRORS: tuple[type[BaseException], ...] = (httpx.HTTPError, MalformedResponse, ConnectionError)
_PROVIDER_SDKS = frozenset({"openai", "anthropic"})
"""Provider SDKs whose ``APIError`` (and subclasses) are provider errors; recognised by class, so
that classifying a failure never imports an SDK the run did not use."""
_ERROR_CHARS = 2_000


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes / contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _provider_error(exc: BaseException) -> bool:
    if isinstance(exc, _PROVIDER_ERRORS):
        return True
    return any(cls.__name__ == "APIError" and cls.__module__.split(".")[0] in _PROVIDER_SDKS
               for cls in type(exc).__mro__)


def classify_failure(exc: BaseException) -> Outcome:
    """The outcome of an episode that raised ``exc`` (see the module docstring)."""
    chain = list(_chain(exc))
    if any(isinstance(e, TaskTimeout) for e in chain):
        return "task_timeout"
    for error in chain:
        if isinstance(error, GraphRecursionError):
            return "step_limit"
        if _provider_error(error):
            return "provider_error"
        if isinstance(error, SandboxError):
            return "sandbox_error"
        if isinstance(error, sqlite3.Error) or (isinstance(error, OSError) and error.errno is not None):
            return "storage_error"
    return "harness_error"


def failed_episode(task_id: str, model: str, exc: BaseException) -> Episode:
    """The record of an episode that raised ``exc``: the turns it finished (if the driver kept
    them), its outcome, a one-line error and a short traceback."""
    kept = partial_episode(exc)
    episode = kept.model_copy(deep=True) if kept is not None else Episode(task_id=task_id, model=model)
    episode.status = "error"
    episode.outcome = classify_failure(exc)
    episode.error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
    episode.settings["traceback"] = "".join(traceback.format_exception(exc, limit=8))[-20_000:]
    return episode
