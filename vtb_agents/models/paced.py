"""The httpx transport that paces a client's requests by its account's limiter and absorbs 429s.

Every request first asks the run's :class:`~vtb_agents.models.limiter.Budgets` for leave (waiting as its
key's limiter says, never past the current deadline, :mod:`vtb_agents.timebox`), then goes out; its
answer's rate-limit headers go back to the limiter. A 429 is absorbed here: the request waits out the
``retry-after`` (only its key waits) and is sent again, as often as the time left allows, and is never
seen by the SDK, the graph's retries or the task's outcome. A 429 is handed on (to the retries and,
if they give up, an outcome) only when waiting would pass the task's time limit or
:data:`MAX_ABSORBED_WAIT_S`, or when it is no rate limit but an exhausted quota (``insufficient_quota``).
"""

from __future__ import annotations

import time

import httpx

from vtb_agents.models.limiter import Budgets, LimitKey, RateLimitWait, limit_key
from vtb_agents.models.ratelimit_headers import RATE_HEADERS, retry_after
from vtb_agents.models.token_estimate import estimate_tokens
from vtb_agents.timebox import deadline

MAX_ABSORBED_WAIT_S = 900.0
"""The longest ``retry-after`` waited out within one request (when no task deadline is nearer)."""
_QUOTA = b"insufficient_quota"
_KEY_HEADERS = ("authorization", "x-api-key", "api-key")


def request_key(request: httpx.Request, provider: str, model: str) -> LimitKey:
    """The budget a request spends: its provider and model, the base URL it goes to (the path up to
    the endpoint's last part) and a hash of its API key header."""
    path = request.url.path.rstrip("/")
    base = str(request.url.copy_with(path=path.rsplit("/", 2)[0] if path.endswith("/chat/completions")
                                     else path.rsplit("/", 1)[0], query=None, fragment=None))
    secret = next((request.headers[name] for name in _KEY_HEADERS if name in request.headers), None)
    return limit_key(provider, base, model, secret)


def _time_left() -> float | None:
    expires_at = deadline()
    return None if expires_at is None else expires_at - time.monotonic()


class PacedTransport(httpx.BaseTransport):
    """Sends through ``inner`` with the leave of ``budgets`` for the request's key (``provider``, ``model``)."""

    def __init__(self, inner: httpx.BaseTransport, budgets: Budgets, provider: str, model: str) -> None:
        self.inner, self.budgets, self.provider, self.model = inner, budgets, provider, model

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` when its key allows; wait out and resend its 429s (see the module's docstring).
        :class:`~vtb_agents.models.limiter.RateLimitWait` (an httpx timeout) if the deadline comes first."""
        key = request_key(request, self.provider, self.model)
        estimate = estimate_tokens(request.content, self.provider)
        while True:
            try:
                grant = self.budgets.acquire(key, estimate, _time_left())
            except RateLimitWait as exc:
                raise httpx.PoolTimeout(str(exc), request=request) from exc
            try:
                response = self.inner.handle_request(request)
            except BaseException:
                self.budgets.release(grant, None, {})
                raise
            headers = {name: response.headers[name] for name in RATE_HEADERS if name in response.headers}
            self.budgets.release(grant, response.status_code, headers)
            if response.status_code != 429 or not self._absorbs(response, headers):
                return response
            self.budgets.absorbed(key)

    def _absorbs(self, response: httpx.Response, headers: dict[str, str]) -> bool:
        """Whether a 429 is waited out: a rate limit (not a spent quota) whose wait fits the time left."""
        body = response.read()
        response.close()
        if _QUOTA in body:
            return False
        wait = retry_after(headers) or 0.0
        left = _time_left()
        return wait <= MAX_ABSORBED_WAIT_S and (left is None or wait < left)

    def close(self) -> None:
        self.inner.close()
