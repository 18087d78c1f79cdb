"""A ``LocalServer`` (``support.servers``) on 127.0.0.1 that speaks the OpenAI chat-completions protocol.

It plays a scripted model: ``respond(request_json) -> reply`` where a reply is a string (content),
a dict ``{"content": ..., "tool_calls": [{"name", "arguments"}], "usage": {...}, "service_tier": ...,
"headers": {...}}`` (``usage`` in the API's form replaces the default 10/5 tokens; ``service_tier`` is the
tier the reply says it was served on; ``headers`` are sent with it), an int HTTP status to fail with,
or ``("raw", text)`` to send a malformed body (``("raw", text, status)``: with that HTTP status,
say a provider's own error body; ``("raw", text, status, headers)``: with these response headers too).
Every request body is kept in ``requests``.
Streaming (``"stream": true``) is answered with server-sent events, as the real API does. Like the
real API it speaks HTTP/1.1 with keep-alive (a streamed answer closes its connection);
``connections`` counts the client connections it accepted.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from support.servers import LocalServer, Reply as HTTPReply, Request

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


def _json(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> HTTPReply:
    """A JSON reply encoded as the API encodes it (ASCII, non-ASCII characters escaped)."""
    return HTTPReply(status, json.dumps(payload).encode(), {**(headers or {}), "Content-Type": "application/json"})


def _events(body: dict[str, Any], message: dict[str, Any], finish: str) -> list[bytes]:
    """The server-sent events of a streamed answer: the text in pieces of 7 characters, then each tool call."""
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        data = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        return f"data: {json.dumps(data)}\n\n".encode()

    events = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    events += [chunk({"content": text[start:start + 7]}) for start in range(0, len(text), 7)]
    for index, call in enumerate(message.get("tool_calls", [])):
        events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        arguments = call["function"]["arguments"]
        events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}))
    return [*events, chunk({}, finish), b"data: [DONE]\n\n"]


class OpenAIServer:
    """Context manager running the server; ``base_url`` is what ``ChatOpenAI(base_url=...)`` takes."""

    def __init__(self, respond: Responder) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.http = LocalServer(fallback=self._answer)
        self.base_url = self.http.url("/v1")

    @property
    def connections(self) -> int:
        return self.http.connections

    def __enter__(self) -> OpenAIServer:
        self.http.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()

    def _answer(self, request: Request) -> HTTPReply:
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return _json(404, {"error": {"message": f"no route {request.path}"}})
        body = request.json()
        with self.http._lock:
            self.requests.append(body)
        reply = self.respond(body)
        if isinstance(reply, int):
            return _json(reply, {"error": {"message": f"scripted failure {reply}", "type": "server_error"}})
        if isinstance(reply, tuple) and reply[0] == "raw":
            headers = reply[3] if len(reply) > 3 else {}
            return HTTPReply(reply[2] if len(reply) > 2 else 200, reply[1].encode(),
                             {**headers, "Content-Type": "application/json"})
        reply = {"content": reply} if isinstance(reply, str) else reply
        message = _message(reply)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if body.get("stream"):
            return HTTPReply(200, b"", {"Content-Type": "text/event-stream"}, stream=_events(body, message, finish))
        return _json(200, completion(body, reply), reply.get("headers"))
