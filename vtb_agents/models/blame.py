"""Whose doing a model call's failure is: the provider's (infrastructure) or the model's.

DESIGN.md "Two kinds of failure" asks for blame to be decided in one place; for everything that
involves the model provider, this is it (``vtb_agents.runner.outcomes.classify_failure`` uses it
for every strategy, a user's own agent included; docs/concepts/outcomes.md states the rules):

- **No answer at all** from the provider within the time given is ``provider_error``, whatever
  the order of ``--task-timeout`` and ``--request-timeout``: the task's time ran out while a model
  request was waiting for the provider, and either the provider had not answered any request of
  the task, or the request had already failed an attempt before the limit (the limit cut its
  retries short: the same provider error that using them all up gives). See :func:`timeout_outcome`.
- A model that got answers and then ran out of **time** (tool work, its next request given only
  what was left) is ``task_timeout``; out of **rounds**, ``tool_round_cap`` / ``step_limit``.
- A rejection the provider documents as the **model's limit**, its context window, is
  ``context_exceeded``: a model outcome, graded on what the model produced. See
  :func:`context_overflow`.
- Any other provider failure (HTTP errors after retries, connections, malformed responses) is
  ``provider_error``. See :func:`provider_outcome`.
"""

from __future__ import annotations

import re

import httpx

from vtb_agents.models.deadline import TaskTimeout
from vtb_agents.models.http import MalformedResponse
from vtb_agents.results import Outcome

_PROVIDER_ERRORS: tuple[type[BaseException], ...] = (httpx.HTTPError, MalformedResponse, ConnectionError)
_PROVIDER_SDKS = frozenset({"openai", "anthropic"})
"""Provider SDKs whose ``APIError`` (and subclasses) are provider errors; recognised by class, so
that classifying a failure never imports an SDK the run did not use."""
_CONTEXT_SDKS = frozenset({"openai", "anthropic", "google", "langchain_google_genai"})
_CONTEXT_CODE = "context_length_exceeded"
"""OpenAI's error code for a request longer than the model's context window (HTTP 400)."""
_CONTEXT_MESSAGES = re.compile(
    r"prompt is too long: \d+ tokens > \d+ maximum"  # Anthropic (400 invalid_request_error)
    r"|maximum context length is \d+ tokens"  # OpenAI-compatible servers (vLLM) without OpenAI's code
    r"|input token count \(\d+\) exceeds the maximum number of tokens allowed",  # Google Gemini API
    re.IGNORECASE)
"""The documented wording of context-window rejections that carry no error code of their own."""


def _classes(exc: BaseException) -> list[tuple[str, str]]:
    """(top-level module, name) of ``exc``'s class and its bases: recognised without importing an SDK."""
    return [(cls.__module__.split(".")[0], cls.__name__) for cls in type(exc).__mro__]


def context_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` is a provider's rejection of a request as longer than the model's context window.

    LangChain's ``ContextOverflowError`` (raised by recent chat-model integrations), and from a
    provider SDK: OpenAI's 400 with error code ``context_length_exceeded``; Anthropic's 400
    ``invalid_request_error`` "prompt is too long: N tokens > M maximum"; OpenAI-compatible servers'
    (vLLM) "maximum context length is N tokens"; the Gemini API's "The input token count (N) exceeds
    the maximum number of tokens allowed (M)".
    """
    classes = _classes(exc)
    if ("langchain_core", "ContextOverflowError") in classes:
        return True
    if not any(module in _CONTEXT_SDKS for module, _ in classes):
        return False
    return getattr(exc, "code", None) == _CONTEXT_CODE or bool(_CONTEXT_MESSAGES.search(str(exc)))


def _provider_error(exc: BaseException) -> bool:
    if isinstance(exc, _PROVIDER_ERRORS):
        return True
    return any(name == "APIError" and module in _PROVIDER_SDKS for module, name in _classes(exc))


def provider_outcome(exc: BaseException) -> Outcome | None:
    """``context_exceeded`` for a context-window rejection, ``provider_error`` for any other failure
    of the model provider, None for an exception that is neither (one exception, not its causes)."""
    if context_overflow(exc):
        return "context_exceeded"
    return "provider_error" if _provider_error(exc) else None


def timeout_outcome(timeout: TaskTimeout) -> Outcome:
    """``provider_error`` when the provider gave no answer within the time given (module docstring),
    else ``task_timeout``."""
    wait = timeout.wait
    return "provider_error" if wait.waiting and (not wait.answered or wait.failed_attempt) else "task_timeout"
