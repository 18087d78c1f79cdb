"""When a model call is worth retrying: rate limits, server errors, dropped connections, timeouts
and 200 responses that are no completion (``MalformedResponse``).

Client errors (4xx other than 408 and 429) are not retried: the same request would fail the same
way. The model node and the LLM judge share the backoff below (exponential with jitter, capped).
"""

from __future__ import annotations

from typing import TypeVar

from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy, default_retry_on

from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.http import MalformedResponse

BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 30.0
"""The retry backoff of model and judge calls: 1 s, 2 s, 4 s, ... never more than 30 s."""

__all__ = ["BACKOFF_INITIAL_S", "BACKOFF_MAX_S", "MalformedResponse", "model_retry_policy",
           "should_retry", "with_backoff"]

_In = TypeVar("_In")
_Out = TypeVar("_Out")


def should_retry(exc: Exception) -> bool:
    """True for 408, 429, 5xx, connection errors, timeouts and malformed 200 responses of a provider call."""
    if isinstance(exc, TaskTimeout) or isinstance(exc.__cause__, TaskTimeout):
        return False
    if isinstance(exc, MalformedResponse):
        return True
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return status in (408, 429) or status >= 500
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return default_retry_on(exc)


def model_retry_policy(max_attempts: int = 4, initial_interval_s: float = BACKOFF_INITIAL_S) -> RetryPolicy:
    """Exponential backoff with jitter for the model node (LangGraph's ``RetryPolicy``)."""
    return RetryPolicy(max_attempts=max_attempts, initial_interval=initial_interval_s, backoff_factor=2.0,
                       max_interval=BACKOFF_MAX_S, jitter=True, retry_on=should_retry)


def with_backoff(runnable: Runnable[_In, _Out], attempts: int, initial_s: float = BACKOFF_INITIAL_S,
                 max_s: float = BACKOFF_MAX_S) -> Runnable[_In, _Out]:
    """``runnable`` retried on any exception up to ``attempts`` calls in all (LangChain's ``with_retry``,
    for the judge and the failure classifier), waiting ``initial_s``, then twice as long each time,
    plus up to ``initial_s`` of jitter, never more than ``max_s``.

    The first wait is set by the ``initial`` key, the only one LangChain's ``ExponentialJitterParams``
    keeps (it validates the dict and drops tenacity's newer name ``multiplier``, which left every
    first wait at 1 s); tenacity warns that ``initial`` is deprecated but honours it.
    """
    return runnable.with_retry(stop_after_attempt=attempts,
                               exponential_jitter_params={"initial": initial_s, "max": max_s, "jitter": initial_s})
