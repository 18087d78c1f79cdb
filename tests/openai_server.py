"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol.

It plays a scripted model: ``respond(request_json) -> reply`` where a reply is a string (content),
a dict ``{"content": ..., "tool_calls": [{"name", "arguments"}], "usage": {...}, "service_tier": ...}``
(``usage`` in the API's form replaces the default 10/5 tokens; ``service_tier`` is the tier the reply
says it was served on), an int HTTP status to fail with,
or ``("raw", text)`` to send a malformed body (``("raw", text, status)``: with that HTTP status,
say a provider's own error body; ``("raw", text, status, headers)``: with these response headers too;
a dict reply's ``headers`` are sent with it). Every request body is kept in ``requests``.
Streaming (``"stream": true``) is answered with server-sent events, as the real API does. Like the
real API it speaks HTTP/1.1 with keep-alive (a streamed answer closes its connection);
``connections`` counts the client connections it accepted.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Reply = Any
Responder = Callable[[dict[str, Any]], Reply]


def _message(reply: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    calls = reply.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": call.get("id", f"call_{i}"), "type": "function",
             "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
            for i, call in enumerate(calls)
        ]
    return message


def completion(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """The chat.completion object answering request ``body`` with ``reply`` (a dict reply, see the module)."""
    message = _message(reply)
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls")
                         else "stop", "logprobs": None}],
            "usage": reply.get("usage") or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            **({"service_tier": reply["service_tier"]} if reply.get("service_tier") else {})}


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 resets connections when 30 tasks connect at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (killed run, timed-out request) is expected here: not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class OpenAIServer:
    """Context manager running the server; ``base_url`` is what ``ChatOpenAI(base_url=...)`` takes."""

    def __init__(self, respond: Responder) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as api.openai.com
            disable_nagle_algorithm = True  # TCP_NODELAY, as real servers: no 40 ms wait between header and body

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                reply = server.respond(body)
                if isinstance(reply, int):
                    self._send(reply, {"error": {"message": f"scripted failure {reply}", "type": "server_error"}})
                    return
                if isinstance(reply, tuple) and reply[0] == "raw":
                    self._send_text(reply[2] if len(reply) > 2 else 200, reply[1],
                                    headers=reply[3] if len(reply) > 3 else None)
                    return
                reply = {"content": reply} if isinstance(reply, str) else reply
                message = _message(reply)
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                if body.get("stream"):
                    self._stream(body, message, finish)
                    return
                self._send(200, completion(body, reply), reply.get("headers"))

            def _stream(self, body: dict[str, Any], message: dict[str, Any], finish: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")  # the end of the body is the end of the connection
                self.end_headers()
                self.close_connection = True

                def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
                    data = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                            "model": body.get("model", "scripted"),
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
                    self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())

                chunk({"role": "assistant", "content": ""})
                text = message.get("content") or ""
                for start in range(0, len(text), 7):
                    chunk({"content": text[start:start + 7]})
                for index, call in enumerate(message.get("tool_calls", [])):
                    chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"], "arguments": ""}}]})
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]})
                chunk({}, finish)
                self.wfile.write(b"data: [DONE]\n\n")

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_text(status, json.dumps(payload), "application/json", headers)

            def _send_text(self, status: int, text: str, content_type: str = "application/json",
                           headers: dict[str, str] | None = None) -> None:
                data = text.encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _HTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
