"""A local chat-completions server that enforces an account's rate limits, as OpenAI and Anthropic do.

It is the tests' scripted server (``tests/support/openai_server.py``) behind a limit: a token bucket of
``requests_per_s`` requests (holding at most one second of them) and, if given, one of
``tokens_per_s`` tokens (counted here from the request: the characters / 4 of its text, tool calls,
tool definitions and response format, and each image by OpenAI's tile formula). A request over either
limit is answered ``429`` with the provider's body and headers and never reaches the scripted model:

* ``style="openai"``: ``{"error": {"message": ..., "type": "requests" | "tokens", "param": null,
  "code": "rate_limit_exceeded"}}``, ``retry-after`` (seconds, rounded up) and ``retry-after-ms``;
  every answer carries ``x-ratelimit-limit-requests`` / ``-remaining-`` / ``-reset-`` (a duration
  such as ``83ms`` or ``1.2s``) and the ``-tokens`` ones.
* ``style="anthropic"``: ``{"type": "error", "error": {"type": "rate_limit_error", "message": ...}}``,
  ``retry-after`` (whole seconds) and ``anthropic-ratelimit-requests-limit`` / ``-remaining`` /
  ``-reset`` (an RFC 3339 time) and the ``-input-tokens`` ones.

:class:`RateLimitedServer` is a context manager like ``OpenAIServer`` (``base_url``); ``log`` keeps
every request's time and whether it was accepted, from which :meth:`RateLimitedServer.measure` gives
the share of the limit used over the span and the 429s per accepted request. Importable by the tests
(``sys.path``: this folder) and used by the benches.
"""

from __future__ import annotations

import base64
import io
import json
import math
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any, Literal

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.openai_server import OpenAIServer, Reply, Responder  # noqa: E402  (the tests' real chat-completions server)

from vtb_agents.models.token_estimate import openai_image_tokens  # noqa: E402

Style = Literal["openai", "anthropic"]


def format_duration(seconds: float) -> str:
    """A reset time as OpenAI writes it: ``20ms`` under a second, else ``1.5s`` or ``6m0s``."""
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s" if minutes else f"{rest:.3g}s"


def request_tokens(body: dict[str, Any]) -> int:
    """What the server counts of a request: the characters / 4 of what the model reads (the messages' text
    and tool calls, the tools' definitions and the response format's schema, which the providers put in
    the prompt and count), each image by OpenAI's formula."""
    chars = sum(len(json.dumps(body[key])) for key in ("tools", "response_format") if body.get(key))
    images = 0
    for message in body.get("messages", []):
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        for part in parts:
            if part.get("type") == "image_url":
                data = part["image_url"]["url"].split(",", 1)[1]
                with Image.open(io.BytesIO(base64.b64decode(data))) as image:
                    images += openai_image_tokens(*image.size)
            else:
                chars += len(str(part.get("text") or ""))
        chars += sum(len(json.dumps(call)) for call in message.get("tool_calls") or [])
    return math.ceil(chars / 4) + images


@dataclass
class _Bucket:
    rate: float
    capacity: float
    level: float
    stamp: float

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + self.rate * (now - self.stamp))
        self.stamp = now

    def reset_s(self) -> float:
        return (self.capacity - self.level) / self.rate

    def wait_s(self, cost: float) -> float:
        return max(0.0, (min(cost, self.capacity) - self.level) / self.rate)


@dataclass(frozen=True)
class Measure:
    """A run against the server: ``accepted`` and ``rejected`` requests, the ``span`` (seconds from the
    first to the last accepted request), ``share`` of the request limit used over it (accepted / what the
    bucket allowed: its rate times the span plus what it held at the start), ``rejected_per_accepted``,
    and with a token limit the accepted requests' ``tokens`` and ``token_share`` (the same ratio for
    tokens; ``None`` without one)."""

    accepted: int
    rejected: int
    span_s: float
    share: float
    rejected_per_accepted: float
    tokens: int = 0
    token_share: float | None = None

    @property
    def binding_share(self) -> float:
        """The share of whichever limit the run came closer to: what held it back."""
        return max(self.share, self.token_share or 0.0)


class RateLimitedServer:
    """``respond`` (a scripted model, as ``OpenAIServer`` takes) behind a rate limit (see the module)."""

    def __init__(self, respond: Responder, requests_per_s: float, tokens_per_s: float | None = None,
                 style: Style = "openai") -> None:
        now = time.monotonic()
        self.respond, self.style = respond, style
        self.requests = _Bucket(requests_per_s, requests_per_s, requests_per_s, now)
        self.tokens = _Bucket(tokens_per_s, tokens_per_s, tokens_per_s, now) if tokens_per_s else None
        self.log: list[tuple[float, bool, int]] = []
        self._lock = threading.Lock()
        self.server = OpenAIServer(self._answer)
        self.base_url = self.server.base_url

    def __enter__(self) -> RateLimitedServer:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def _answer(self, body: dict[str, Any]) -> Reply:
        tokens = request_tokens(body) if self.tokens is not None else 0
        with self._lock:
            now = time.monotonic()
            self.requests.refill(now)
            over = "requests" if self.requests.level < 1 else None
            if self.tokens is not None:
                self.tokens.refill(now)
                if over is None and self.tokens.level < min(tokens, self.tokens.capacity):
                    over = "tokens"
            if over is None:
                self.requests.level -= 1
                if self.tokens is not None:
                    self.tokens.level -= tokens
            self.log.append((now, over is None, tokens))
            headers = self._headers(now)
            wait = self.requests.wait_s(1) if over == "requests" else (
                self.tokens.wait_s(tokens) if over == "tokens" and self.tokens is not None else 0.0)
        if over is not None:
            return ("raw", json.dumps(self._error(over, wait)), 429, {**headers, **self._retry(wait)})
        reply = self.respond(body)
        reply = {"content": reply} if isinstance(reply, str) else reply
        if not isinstance(reply, dict):
            return reply
        return {**reply, "headers": {**headers, **reply.get("headers", {})}}

    def _headers(self, now: float) -> dict[str, str]:
        budgets = [("requests", self.requests)] + ([("tokens", self.tokens)] if self.tokens is not None else [])
        headers: dict[str, str] = {}
        for name, bucket in budgets:
            limit, remaining, reset = int(bucket.capacity), max(0, math.floor(bucket.level)), bucket.reset_s()
            if self.style == "openai":
                headers.update({f"x-ratelimit-limit-{name}": str(limit),
                                f"x-ratelimit-remaining-{name}": str(remaining),
                                f"x-ratelimit-reset-{name}": format_duration(reset)})
            else:
                at = datetime.now(UTC) + timedelta(seconds=reset)
                budget = "requests" if name == "requests" else "input-tokens"
                headers.update({f"anthropic-ratelimit-{budget}-limit": str(limit),
                                f"anthropic-ratelimit-{budget}-remaining": str(remaining),
                                f"anthropic-ratelimit-{budget}-reset": at.isoformat(timespec="milliseconds")
                                .replace("+00:00", "Z")})
        return headers

    def _retry(self, wait: float) -> dict[str, str]:
        if self.style == "openai":
            return {"retry-after": str(math.ceil(wait)), "retry-after-ms": str(max(1, math.ceil(wait * 1000)))}
        return {"retry-after": str(max(1, math.ceil(wait)))}

    def _error(self, over: str, wait: float) -> dict[str, Any]:
        limit = self.requests.capacity if over == "requests" else (self.tokens.capacity if self.tokens else 0)
        message = (f"Rate limit reached for {over} per second: Limit {limit:g}. "
                   f"Please try again in {format_duration(wait)}.")
        if self.style == "openai":
            return {"error": {"message": message, "type": over, "param": None, "code": "rate_limit_exceeded"}}
        return {"type": "error", "error": {"type": "rate_limit_error", "message": message}}

    def measure(self) -> Measure:
        """The share of the limit used and the 429s per accepted request, so far (see :class:`Measure`)."""
        with self._lock:
            log = list(self.log)
        accepted = [(t, tokens) for t, ok, tokens in log if ok]
        rejected = len(log) - len(accepted)
        span = accepted[-1][0] - accepted[0][0] if len(accepted) > 1 else 0.0
        allowed = self.requests.rate * span + self.requests.capacity
        tokens = sum(count for _, count in accepted)
        token_share = tokens / (self.tokens.rate * span + self.tokens.capacity) if self.tokens else None
        return Measure(len(accepted), rejected, span, len(accepted) / allowed if accepted else 0.0,
                       rejected / max(1, len(accepted)), tokens, token_share)
