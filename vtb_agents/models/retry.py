"""When a model call is worth retrying: rate limits, server errors, dropped connections, timeouts
and 200 responses that are no completion (``MalformedResponse``).

Client errors (4xx other than 408 and 429) are not retried: the same request would fail the same
way. The model node and the LLM judge share the backoff below (exponential with jitter, capped).
"""

from __future__ import annotations

from langgraph.types import RetryPolicy, default_retry_on

from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.http import MalformedResponse

BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 30.0
"""The retry backoff of model and judge calls: 1 s, 2 s, 4 s, ... never more than 30 s."""

__all__ = ["BACKOFF_INITIAL_S", "BACKOFF_MAX_S", "MalformedResponse", "model_retry_policy",
           "should_retry"]


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
