"""When a model call is worth retrying: rate limits, server errors and dropped connections.

Client errors (4xx other than 429) are not retried: the same request would fail the same way.
"""

from __future__ import annotations

from langgraph.types import RetryPolicy, default_retry_on


class TaskTimeout(TimeoutError):
    """A task ran past its time limit; raised at the next model call, never retried."""


def should_retry(exc: Exception) -> bool:
    """True for 429, 5xx, connection errors and timeouts of a provider call."""
    if isinstance(exc, TaskTimeout):
        return False
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return status == 429 or status >= 500
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return default_retry_on(exc)


def model_retry_policy(max_attempts: int = 4, initial_interval_s: float = 1.0) -> RetryPolicy:
    """Exponential backoff with jitter for the model node (LangGraph's ``RetryPolicy``)."""
    return RetryPolicy(max_attempts=max_attempts, initial_interval=initial_interval_s, backoff_factor=2.0,
                       max_interval=60.0, jitter=True, retry_on=should_retry)
