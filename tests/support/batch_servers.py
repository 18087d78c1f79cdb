"""Real HTTP servers on 127.0.0.1 speaking OpenAI's Batch API and Anthropic's Message Batches API.

Each answers every request of a batch the way the scripted judge ``respond(request_json) -> reply``
answers it live (a string: the reply's text, as in tests/support/openai_server.py), and serves live calls
too (``/v1/chat/completions``, ``/v1/messages``), which it counts in ``live`` apart from the
requests submitted in batches (``submitted``: one list of request bodies per batch, by custom id).

Controls: ``release`` (a threading.Event, set by default) lets batches end; cleared, every batch stays ``in_progress``;
``outcome(custom_id, body) -> "succeeded" | "expired" | "errored"`` decides each batch
request's fate (default: all succeed); ``live_status``, if set, is the HTTP status every live call
fails with. ``polls`` counts status requests.
"""

from __future__ import annotations

import json
import threading
import time
from email.parser import BytesParser
from typing import Any, Callable

from support.openai_server import completion
from support.servers import LocalServer, Reply as HTTPReply, Request

Respond = Callable[[dict[str, Any]], str]
Outcome = Callable[[str, dict[str, Any]], str]


class _BatchServer:
    """What both servers share: a ``LocalServer`` whose every request goes to :meth:`route`
    (``(method, path) -> (status, payload)``; bytes are sent as a file, anything else as JSON)."""

    base_path = ""

    def __init__(self, respond: Respond, outcome: Outcome | None = None) -> None:
        self.respond = respond
        self.outcome: Outcome = outcome or (lambda custom_id, body: "succeeded")
        self.release = threading.Event()
        self.release.set()
        self.live: list[dict[str, Any]] = []
        self.submitted: list[dict[str, dict[str, Any]]] = []
        self.polls = 0
        self.live_status: int | None = None
        self.lock = threading.Lock()
        self.http = LocalServer(fallback=self._serve)
        self.root = self.http.url("")
        self.base_url = self.root + self.base_path

    def _serve(self, request: Request) -> HTTPReply:
        content_type = request.headers.get("content-type", "")
        status, payload = self.route(request.method, request.path, request.body, content_type)
        if isinstance(payload, bytes):
            return HTTPReply(status, payload, {"Content-Type": "application/octet-stream"})
        return HTTPReply(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    def __enter__(self) -> Any:
        self.http.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()

    def route(self, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, Any]:
        raise NotImplementedError

    def fates(self, requests: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Each request's fate, decided once when its batch ends."""
        return {custom_id: self.outcome(custom_id, body) for custom_id, body in requests.items()}


class OpenAIBatchServer(_BatchServer):
    """OpenAI: ``/v1/files`` (multipart upload, content), ``/v1/batches`` (create, retrieve), and live
    ``/v1/chat/completions``."""

    base_path = "/v1"

    def __init__(self, respond: Respond, outcome: Outcome | None = None) -> None:
        super().__init__(respond, outcome)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}

    def _file(self, data: bytes, purpose: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = data
        return {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                "filename": f"{file_id}.jsonl", "purpose": purpose, "status": "processed"}

    def route(self, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, Any]:
        with self.lock:
            if method == "POST" and path == "/v1/chat/completions":
                body = json.loads(raw)
                self.live.append(body)
                if self.live_status:
                    return self.live_status, {"error": {"message": "scripted failure", "type": "server_error"}}
                return 200, completion(body, {"content": self.respond(body)})
            if method == "POST" and path == "/v1/files":
                message = BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
                fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                          for part in message.get_payload()}
                return 200, self._file(fields["file"], fields["purpose"].decode())
            if method == "POST" and path == "/v1/batches":
                request = json.loads(raw)
                lines = [json.loads(line) for line in self.files[request["input_file_id"]].decode().splitlines()]
                assert request["completion_window"] == "24h"
                assert {line["url"] for line in lines} == {request["endpoint"]}
                batch_id = f"batch_{len(self.batches) + 1}"
                self.submitted.append({line["custom_id"]: line["body"] for line in lines})
                self.batches[batch_id] = {"id": batch_id, "object": "batch", "endpoint": request["endpoint"],
                                          "input_file_id": request["input_file_id"], "completion_window": "24h",
                                          "status": "in_progress", "created_at": int(time.time()),
                                          "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                                          "requests": self.submitted[-1]}
                return 200, self._public(self.batches[batch_id])
            if method == "GET" and path.startswith("/v1/batches/"):
                self.polls += 1
                batch = self.batches[path.rsplit("/", 1)[1]]
                if self.release.is_set() and batch["status"] == "in_progress":
                    self._finish(batch)
                return 200, self._public(batch)
            if method == "GET" and path.startswith("/v1/files/") and path.endswith("/content"):
                return 200, self.files[path.split("/")[3]]
        return 404, {"error": {"message": f"no route {method} {path}"}}

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in batch.items() if key != "requests"}

    def _finish(self, batch: dict[str, Any]) -> None:
        output, errors = [], []
        fates = self.fates(batch["requests"])
        for custom_id, body in batch["requests"].items():
            if fates[custom_id] == "succeeded":
                output.append({"id": f"req-{custom_id[:8]}", "custom_id": custom_id, "error": None,
                               "response": {"status_code": 200, "request_id": "r",
                                            "body": completion(body, {"content": self.respond(body)})}})
            elif fates[custom_id] == "expired":
                errors.append({"id": f"req-{custom_id[:8]}", "custom_id": custom_id, "response": None,
                               "error": {"code": "batch_expired", "message": "This request could not be executed "
                                                                             "before the completion window expired."}})
            else:
                errors.append({"id": f"req-{custom_id[:8]}", "custom_id": custom_id, "error": None,
                               "response": {"status_code": 500, "request_id": "r",
                                            "body": {"error": {"message": "scripted failure"}}}})
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                batch[name] = self._file("".join(json.dumps(line) + "\n" for line in lines).encode(),
                                         "batch_output")["id"]
        batch["status"] = "expired" if any(fate == "expired" for fate in fates.values()) else "completed"
        batch["request_counts"] = {"total": len(fates), "completed": len(output), "failed": len(errors)}


def anthropic_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The Message answering request ``body`` with ``text``."""
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": body.get("model", "scripted"),
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 7}}


class AnthropicBatchServer(_BatchServer):
    """Anthropic: ``/v1/messages/batches`` (create, retrieve, results) and live ``/v1/messages``."""

    def __init__(self, respond: Respond, outcome: Outcome | None = None) -> None:
        super().__init__(respond, outcome)
        self.batches: dict[str, dict[str, Any]] = {}

    def route(self, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, Any]:
        path = path.split("?", 1)[0]
        with self.lock:
            if method == "POST" and path == "/v1/messages":
                body = json.loads(raw)
                self.live.append(body)
                if self.live_status:
                    return self.live_status, {"type": "error", "error": {"type": "api_error", "message": "scripted"}}
                return 200, anthropic_message(body, self.respond(body))
            if method == "POST" and path == "/v1/messages/batches":
                requests = {item["custom_id"]: item["params"] for item in json.loads(raw)["requests"]}
                self.submitted.append(requests)
                batch_id = f"msgbatch_{len(self.batches) + 1}"
                self.batches[batch_id] = {"requests": requests, "results": None}
                return 200, self._public(batch_id)
            if method == "GET" and path.endswith("/results"):
                results = self.batches[path.split("/")[4]]["results"]
                return 200, "".join(json.dumps(line) + "\n" for line in results).encode()
            if method == "GET" and path.startswith("/v1/messages/batches/"):
                self.polls += 1
                batch_id = path.rsplit("/", 1)[1]
                if self.release.is_set() and self.batches[batch_id]["results"] is None:
                    self._finish(self.batches[batch_id])
                return 200, self._public(batch_id)
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {method} {path}"}}

    def _finish(self, batch: dict[str, Any]) -> None:
        results = []
        for custom_id, fate in self.fates(batch["requests"]).items():
            body = batch["requests"][custom_id]
            result: dict[str, Any] = (
                {"type": "succeeded", "message": anthropic_message(body, self.respond(body))} if fate == "succeeded"
                else {"type": "expired"} if fate == "expired"
                else {"type": "errored", "error": {"type": "error", "error": {"type": "api_error",
                                                                              "message": "scripted failure"}}})
            results.append({"custom_id": custom_id, "result": result})
        batch["results"] = results

    def _public(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        results = batch["results"]
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if results is None:
            counts["processing"] = len(batch["requests"])
        else:
            for line in results:
                counts[line["result"]["type"]] += 1
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"id": batch_id, "type": "message_batch", "processing_status": "in_progress" if results is None
                else "ended", "request_counts": counts, "created_at": now, "expires_at": now,
                "ended_at": None if results is None else now, "archived_at": None, "cancel_initiated_at": None,
                "results_url": None if results is None else f"{self.root}/v1/messages/batches/{batch_id}/results"}
