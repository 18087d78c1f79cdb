"""A loopback HTTP server that stands in for the judge's provider, so that the batch judge sends and
reads exactly what the live judge does (docs/how-to/batch-judging.md).

The LLM judge (:class:`~vtb_agents.judges.llm.LLMJudge`) is built as for a live run, with one change:
its base URL is this relay on 127.0.0.1. Then the package's own judge code (prompt, structured-output
settings, the SDK's request body, its parsing of the reply and the usage it reports) runs unchanged:

* to **capture** a request, the relay records the request's path and JSON body and answers 400, so the
  judge (one attempt, no retries) gives up; the body is what goes into the provider's batch file;
* to **answer** a request, the relay replies with the response body the batch returned for it, once;
  the judge parses it as it would a live reply.

One request at a time goes through a relay (:meth:`Relay.capture` and :meth:`Relay.answer` hold its lock).
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from vtb_agents.judges.base import Judgement

RELAY_REFUSAL = "vtb batch relay: request captured"


@dataclass(frozen=True)
class CapturedRequest:
    """One request the judge sent: its URL path (``/v1/chat/completions``, ``/v1/messages``) and JSON body."""

    path: str
    body: dict[str, Any]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is expected (a judge that gave up): not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Relay:
    """The loopback server (a context manager); ``url`` is its root (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._captured: CapturedRequest | None = None
        self._reply: tuple[int, bytes] | None = None
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                status, data = relay._respond(CapturedRequest(self.path, body))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="vtb-batch-relay", daemon=True)

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _respond(self, request: CapturedRequest) -> tuple[int, bytes]:
        """The reply to ``request``: the one prepared by :meth:`answer` (once), else a 400 after recording it."""
        reply, self._reply = self._reply, None
        if reply is not None:
            return reply
        self._captured = request
        return 400, json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                           "message": RELAY_REFUSAL}}).encode()

    def capture(self, ask: Callable[[], Judgement]) -> CapturedRequest | None:
        """The request ``ask`` (a call of the judge through this relay) sends, or None if it sent none."""
        with self._lock:
            self._captured, self._reply = None, None
            ask()
            captured, self._captured = self._captured, None
        return captured

    def answer(self, ask: Callable[[], Judgement], status: int, body: dict[str, Any]) -> Judgement:
        """The judgement ``ask`` gives when its request is answered with ``body`` (HTTP ``status``)."""
        with self._lock:
            self._captured, self._reply = None, (status, json.dumps(body).encode())
            try:
                return ask()
            finally:
                self._reply = None
