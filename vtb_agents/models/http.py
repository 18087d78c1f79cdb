"""Bounded, checked HTTP for model and judge clients.

Every request of a client built here has a timeout (``--request-timeout``, default 120 s) that is
never longer than what is left of the current task's time limit (``requests_until``, entered by
the task's deadline), and a ``200`` chat-completions response that is not a usable completion
(malformed JSON, no ``choices``) fails as :class:`MalformedResponse`, which the model node and the
judge retry like a server error instead of taking it for an answer or a crash.

The SDK's own retries are turned off (``max_retries=0``): retries happen in one place, the graph's
``RetryPolicy`` for the model and ``with_retry`` for the judge, with the same capped backoff.
httpx's read timeout bounds each wait for bytes, so a server that hangs is cut off; one that
trickles bytes forever is bounded by the task limit, checked again before every retry.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx

from vtb_agents.defaults import DEFAULT_REQUEST_TIMEOUT_S as DEFAULT_REQUEST_TIMEOUT_S  # re-exported
from vtb_agents.timebox import deadline, until

if TYPE_CHECKING:
    from vtb_agents.models.limiter import Budgets

_MIN_TIMEOUT_S = 0.01
_TIMEOUT_KEYS = ("connect", "read", "write", "pool")
_TIMEOUT_PROVIDERS = frozenset({"openai", "azure_openai", "anthropic"})


class MalformedResponse(Exception):
    """A provider answered 200 with something that is not a completion (retried, then a provider error)."""


@contextmanager
def requests_until(expires_at: float | None) -> Iterator[None]:
    """Within the block, requests of bounded clients end by ``expires_at`` (``time.monotonic()``):
    the current deadline of :mod:`vtb_agents.timebox`, which time-boxed calls (judges, plugin tools)
    keep to as well."""
    with until(expires_at):
        yield


def capped_timeouts(timeouts: dict[str, float | None]) -> dict[str, float | None]:
    """``timeouts`` (httpx's per-phase dict) cut to the time left before the current deadline."""
    expires_at = deadline()
    if expires_at is None:
        return timeouts
    left = max(expires_at - time.monotonic(), _MIN_TIMEOUT_S)
    return {key: left if timeouts.get(key) is None else min(timeouts[key] or left, left) for key in _TIMEOUT_KEYS}


def completion_problem(body: bytes) -> str | None:
    """Why a 200 body of a non-streamed chat-completions request is no completion; None if it is one."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        return f"the body is not JSON ({exc})"
    if not isinstance(data, dict):
        return f"the body is a JSON {type(data).__name__}, not an object"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return "the response has no choices"
    if not all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices):
        return "a choice has no message"
    return None


_STREAM_KEY = b'"stream"'
_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')


def _streamed(request: httpx.Request) -> bool:
    """Whether ``request`` asks for a streamed completion (``"stream": true`` at the top level).

    The body is parsed only when it holds ``"stream"`` followed by ``true`` somewhere: a request
    body carries every image of the conversation as base64, megabytes that a full parse on every
    model call would spend the GIL on. Inside JSON strings a quote is escaped, so a body without
    that unescaped key and value cannot be a streamed request.
    """
    try:
        content = request.content
    except httpx.RequestNotRead:
        return False
    position = content.find(_STREAM_KEY)
    while position >= 0:
        if _STREAM_TRUE.match(content, position):
            break
        position = content.find(_STREAM_KEY, position + 1)
    else:
        return False
    try:
        return bool(json.loads(content).get("stream"))
    except (ValueError, AttributeError):
        return False


class BoundedTransport(httpx.BaseTransport):
    """An httpx transport that caps timeouts at the task deadline and checks completion bodies."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` with capped timeouts; raise MalformedResponse for an unusable completion."""
        request.extensions["timeout"] = capped_timeouts(dict(request.extensions.get("timeout") or {}))
        response = self.inner.handle_request(request)
        if response.status_code != 200 or not request.url.path.endswith("/chat/completions") or _streamed(request):
            return response
        try:
            raw = b"".join(response.iter_raw())
        finally:
            response.close()
        body = httpx.Response(200, headers=response.headers, content=raw).content  # decoded (gzip...)
        problem = completion_problem(body)
        if problem is not None:
            raise MalformedResponse(f"{request.url}: 200 response that is not a completion: {problem}")
        return httpx.Response(200, headers=response.headers, stream=httpx.ByteStream(raw), request=request,
                              extensions=response.extensions)

    def close(self) -> None:
        self.inner.close()


POOL_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
"""The connection pool of the one client a run's model shares: the openai SDK's own defaults. httpx's
(20 kept alive) would close and reopen connections (a TLS handshake each) past 20 concurrent tasks."""


PACED_PROVIDERS = frozenset({"openai"})
"""Providers whose client goes through our transport, so that the run's limiters pace it
(:mod:`vtb_agents.models.paced`); others keep langchain-core's ``InMemoryRateLimiter`` at ``--rps``."""


def client_options(provider: str, request_timeout_s: float, budgets: Budgets | None = None,
                   model: str = "") -> dict[str, Any]:
    """Keyword arguments for ``init_chat_model``: the timeout and no SDK retries (OpenAI, Azure OpenAI,
    Anthropic), and for OpenAI(-compatible) servers a client over :class:`BoundedTransport`, paced by
    ``budgets`` (the run's limiters) as the budget of ``model``."""
    if request_timeout_s <= 0:
        raise ValueError(f"a request timeout must be positive, not {request_timeout_s}")
    if provider not in _TIMEOUT_PROVIDERS:
        return {}  # other integrations name these settings differently: their own defaults apply
    options: dict[str, Any] = {"timeout": request_timeout_s, "max_retries": 0}
    if provider == "openai":
        transport: httpx.BaseTransport = BoundedTransport(httpx.HTTPTransport(limits=POOL_LIMITS))
        if budgets is not None:
            from vtb_agents.models.paced import PacedTransport

            transport = PacedTransport(transport, budgets, provider, model)
        options["http_client"] = httpx.Client(transport=transport, timeout=httpx.Timeout(request_timeout_s))
    return options
