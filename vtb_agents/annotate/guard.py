"""Request checks for the project's local HTTP servers (``vtb annotate``): only this machine's names,
and writes only from the page the server itself served.

A local server is reachable by any web page open in the user's browser: a cross-origin "simple"
request (``text/plain`` POST) arrives without a CORS preflight, and DNS rebinding makes a foreign
host name resolve to 127.0.0.1 so that its page can read the answers. :class:`RequestGuard` refuses
both: every request must name the server by ``127.0.0.1:PORT`` or ``localhost:PORT`` in its
``Host`` header; a state-changing request must also send ``application/json``, a same-origin
``Origin`` (when the browser sends one) and the per-session token embedded in the served page.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Protocol

TOKEN_HEADER = "X-VTB-Token"
"""The header carrying the session token on state-changing requests."""
LOCAL_NAMES = ("127.0.0.1", "localhost")


class Headers(Protocol):
    """Request headers, looked up by name (``http.server``'s ``self.headers``, or a dict)."""

    def get(self, name: str, /) -> str | None:
        """The header's value, or None."""


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the HTTP status to answer and a message naming the problem."""

    status: int
    error: str


@dataclass(frozen=True)
class RequestGuard:
    """The checks of one server on ``port``, with its session ``token`` (the served page carries it)."""

    port: int
    token: str

    @property
    def hosts(self) -> frozenset[str]:
        """The ``Host`` header values this server answers (lower case)."""
        return frozenset(f"{name}:{self.port}" for name in LOCAL_NAMES)

    def check_host(self, headers: Headers) -> Refusal | None:
        """Refuse a request whose ``Host`` is not this server's own name (DNS rebinding)."""
        host = (headers.get("Host") or "").strip().lower()
        if host not in self.hosts:
            return Refusal(421, f"this server answers only {' or '.join(sorted(self.hosts))}, not Host {host!r}")
        return None

    def check_write(self, headers: Headers) -> Refusal | None:
        """Refuse a state-changing request unless it is JSON, same-origin and carries the session token
        (the ``Host`` check comes first: call :meth:`check_host` too)."""
        mime = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if mime != "application/json":
            return Refusal(415, f"expected Content-Type application/json, not {mime or 'none'!r}")
        origin = headers.get("Origin")
        own = f"http://{(headers.get('Host') or '').strip().lower()}"
        if origin is not None and origin.strip().lower() != own:
            return Refusal(403, f"cross-origin request from {origin!r} refused")
        if not hmac.compare_digest((headers.get(TOKEN_HEADER) or "").encode(), self.token.encode()):
            return Refusal(403, f"missing or wrong {TOKEN_HEADER}: reload the page served by this server")
        return None
