"""A LangSmith stand-in for tests: a ``LocalServer`` (``support.servers``) on 127.0.0.1 speaking the REST wire
format the installed ``langsmith`` client uses, keeps what it is sent in memory and answers like the service.

Implemented (only what the client calls for tracing, datasets and ``evaluate``):

* ``GET /info``: batch-ingest config and instance flags (multipart examples; zstd run compression
  if ``zstd=True``, the service's default) with a server version new enough for batched feedback;
* ``POST /runs/multipart`` (multipart/form-data, optionally ``Content-Encoding: zstd``): parts
  ``post.<id>``, ``patch.<id>`` (+ ``.inputs``, ``.outputs``, ``.extra``, ``.error``, ``.events``,
  ``.serialized``), ``attachment.<run id>.<name>`` and ``feedback.<id>``; also ``POST /runs/batch``,
  ``POST /runs`` and ``PATCH /runs/<id>``;
* ``POST|GET /sessions``, ``GET|PATCH /sessions/<id>`` (projects and experiments; 409 on a taken name);
* ``POST|GET /datasets``, ``GET|DELETE /datasets/<id>`` (409 on a taken name);
* ``POST /v1/platform/datasets/<id>/examples`` (multipart: ``<id>``, ``<id>.inputs``, ``<id>.outputs``,
  ``<id>.attachment.<name>``), ``GET /examples`` (``dataset``, ``id``, ``offset``/``limit``,
  ``select=attachment_urls``) and ``GET /attachments/<example>/<name>`` (the "presigned" URLs);
* ``POST /feedback``.

Every request must carry the test API key. Requests to anything else, or that fail a check, answer
an error and are listed in ``errors`` (tests assert it stays empty).
"""

from __future__ import annotations

import io
import json
import re
import threading
import uuid
from datetime import datetime, UTC
from dataclasses import replace
from typing import Any, Callable

import numpy as np
import zstandard
from PIL import Image

from support.servers import LocalServer, Reply, Request

API_KEY = "lsv2_pt_test-key"
TENANT_ID = str(uuid.uuid4())
RUN_PART_KEYS = ("inputs", "outputs", "extra", "error", "events", "serialized")


def block_git(monkeypatch: Any) -> None:
    """Stop the langsmith client from running ``git`` (it reads git metadata for runs and experiments)."""
    import langsmith.env._git as git
    import langsmith.env._runtime_env as runtime_env

    monkeypatch.setattr(git, "exec_git", lambda command: None)
    monkeypatch.setattr(runtime_env, "exec_git", lambda command: None)
    for cached in (runtime_env._get_default_revision_id, runtime_env.get_langchain_env_var_metadata, git.get_git_info):
        cached.cache_clear()


def long_base64_runs(payload: bytes, limit: int) -> list[int]:
    """Lengths of the base64-alphabet runs longer than ``limit`` bytes in ``payload``."""
    return [m.end() - m.start() for m in re.finditer(rb"[A-Za-z0-9+/]{%d,}" % (limit + 1), payload)]


def noise_png(width: int = 800, height: int = 600, seed: int = 0) -> bytes:
    """A PNG of random pixels, which does not compress (about 1.4 MB at 800x600)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def now() -> str:
    return datetime.now(UTC).isoformat()


def parse_multipart(body: bytes, content_type: str) -> list[tuple[str, dict[str, str], bytes]]:
    """(name, headers, data) of each part of a multipart/form-data body, data byte-exact."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    assert match, f"no multipart boundary in {content_type!r}"
    delimiter = b"--" + match.group(1).encode()
    chunks = body.split(delimiter)
    assert chunks[-1].strip() in (b"--", b""), "multipart body does not end with the closing delimiter"
    parts = []
    for chunk in chunks[1:-1]:
        assert chunk.startswith(b"\r\n") and chunk.endswith(b"\r\n"), "malformed multipart part"
        head, sep, data = chunk[2:-2].partition(b"\r\n\r\n")
        assert sep, "multipart part without a blank line after its headers"
        headers = {}
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        name = re.search(r'name="([^"]*)"', headers.get("content-disposition", ""))
        assert name, f"multipart part without a name: {headers}"
        parts.append((name.group(1), headers, data))
    return parts


class LangSmithStandIn:
    """The stand-in; use as a context manager. ``url`` and ``API_KEY`` configure a client."""

    def __init__(self, *, zstd: bool = True) -> None:
        self.zstd = zstd
        self.calls: list[Request] = []
        self.errors: list[str] = []
        self.ingested: list[bytes] = []  # every run/feedback ingestion body, decompressed
        self.runs: dict[str, dict[str, Any]] = {}
        self.run_attachments: dict[str, dict[str, bytes]] = {}
        self.feedback: list[dict[str, Any]] = []
        self.sessions: dict[str, dict[str, Any]] = {}
        self.datasets: dict[str, dict[str, Any]] = {}
        self.examples: dict[str, dict[str, Any]] = {}
        self.attachments: dict[tuple[str, str], tuple[str, bytes]] = {}
        self.lock = threading.RLock()
        self.http = LocalServer(fallback=self._answer)
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., tuple[int, Any]]]] = [
            ("GET", re.compile(r"/info"), self.info),
            ("POST", re.compile(r"/runs/multipart"), self.runs_multipart),
            ("POST", re.compile(r"/runs/batch"), self.runs_batch),
            ("POST", re.compile(r"/runs"), self.run_create),
            ("PATCH", re.compile(r"/runs/([\w-]+)"), self.run_update),
            ("POST", re.compile(r"/sessions"), self.session_create),
            ("GET", re.compile(r"/sessions"), self.session_list),
            ("GET", re.compile(r"/sessions/([\w-]+)"), self.session_read),
            ("PATCH", re.compile(r"/sessions/([\w-]+)"), self.session_update),
            ("POST", re.compile(r"/datasets"), self.dataset_create),
            ("GET", re.compile(r"/datasets"), self.dataset_list),
            ("GET", re.compile(r"/datasets/([\w-]+)"), self.dataset_read),
            ("DELETE", re.compile(r"/datasets/([\w-]+)"), self.dataset_delete),
            ("POST", re.compile(r"/v1/platform/datasets/([\w-]+)/examples"), self.examples_upload),
            ("GET", re.compile(r"/examples"), self.example_list),
            ("GET", re.compile(r"/attachments/([\w-]+)/([\w-]+)"), self.attachment_read),
            ("POST", re.compile(r"/feedback"), self.feedback_create),
        ]

    # ---------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return self.http.url("")

    def __enter__(self) -> LangSmithStandIn:
        self.http.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()

    # ---------------------------------------------------------------- queries for tests

    def root_runs(self) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if not r.get("parent_run_id")]

    def runs_of(self, run_type: str) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if r.get("run_type") == run_type]

    def session_named(self, name: str) -> dict[str, Any]:
        return next(s for s in self.sessions.values() if s["name"] == name)

    # ---------------------------------------------------------------- handlers: (status, JSON or bytes)

    def info(self, call: Request) -> tuple[int, Any]:
        return 200, {"version": "0.12.33", "license_expiration_time": None,
                     "batch_ingest_config": {"use_multipart_endpoint": True, "size_limit": 100,
                                             "size_limit_bytes": 20_971_520, "scale_up_nthreads_limit": 16,
                                             "scale_up_qsize_trigger": 1000, "scale_down_nempty_trigger": 4},
                     "instance_flags": {"zstd_compression_enabled": self.zstd,
                                        "dataset_examples_multipart_enabled": True,
                                        "examples_multipart_enabled": True}}

    def _ingest_op(self, operation: str, run_id: str, body: dict[str, Any], main: bool = True) -> None:
        run = self.runs.setdefault(run_id, {"id": run_id})
        if operation == "post" and main:
            assert body.get("trace_id") and body.get("dotted_order"), f"run {run_id} without trace_id/dotted_order"
        run.update({k: v for k, v in body.items() if v is not None or k not in run})

    def runs_multipart(self, call: Request) -> tuple[int, Any]:
        self.ingested.append(call.body)
        for name, headers, data in parse_multipart(call.body, call.headers["content-type"]):
            kind, _, rest = name.partition(".")
            if kind == "feedback":
                self.feedback.append(json.loads(data))
            elif kind == "attachment":
                run_id, _, attachment = rest.partition(".")
                self.run_attachments.setdefault(run_id, {})[attachment] = data
            elif kind in ("post", "patch"):
                run_id, _, field = rest.partition(".")
                assert field in ("", *RUN_PART_KEYS), f"unknown run part {name!r}"
                assert headers.get("content-type", "").startswith("application/json"), headers
                value = json.loads(data)
                self._ingest_op(kind, run_id, {field: value} if field else value, main=not field)
            else:
                raise AssertionError(f"unknown multipart part {name!r}")
        return 202, {}

    def runs_batch(self, call: Request) -> tuple[int, Any]:
        self.ingested.append(call.body)
        body = call.json()
        for operation in ("post", "patch"):
            for run in body.get(operation) or []:
                self._ingest_op(operation, str(run["id"]), run)
        return 202, {}

    def run_create(self, call: Request) -> tuple[int, Any]:
        self.ingested.append(call.body)
        run = call.json()
        self.runs.setdefault(str(run["id"]), {}).update(run)
        return 202, {}

    def run_update(self, call: Request, run_id: str) -> tuple[int, Any]:
        self.ingested.append(call.body)
        self.runs.setdefault(run_id, {"id": run_id}).update(call.json())
        return 202, {}

    def _session(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": body.get("id") or str(uuid.uuid4()), "name": body["name"], "tenant_id": TENANT_ID,
                "start_time": body.get("start_time") or now(), "end_time": None, "extra": body.get("extra"),
                "description": body.get("description"), "reference_dataset_id": body.get("reference_dataset_id")}

    def session_create(self, call: Request) -> tuple[int, Any]:
        body = call.json()
        taken = [s for s in self.sessions.values() if s["name"] == body["name"]]
        if taken:
            if call.query.get("upsert") == ["true"]:
                return 200, taken[0]
            return 409, {"detail": "Session already exists"}
        session = self._session(body)
        self.sessions[session["id"]] = session
        return 200, session

    def session_list(self, call: Request) -> tuple[int, Any]:
        name = (call.query.get("name") or [None])[0]
        return 200, [s for s in self.sessions.values() if name is None or s["name"] == name]

    def session_read(self, call: Request, session_id: str) -> tuple[int, Any]:
        session = self.sessions.get(session_id)
        return (200, session) if session else (404, {"detail": "Session not found"})

    def session_update(self, call: Request, session_id: str) -> tuple[int, Any]:
        session = self.sessions.get(session_id)
        if session is None:
            return 404, {"detail": "Session not found"}
        session.update({k: v for k, v in call.json().items() if v is not None})
        return 200, session

    def dataset_create(self, call: Request) -> tuple[int, Any]:
        body = call.json()
        assert body.get("data_type") in ("kv", "llm", "chat"), body
        if any(d["name"] == body["name"] for d in self.datasets.values()):
            return 409, {"detail": "Dataset with this name already exists."}
        dataset = {"id": str(uuid.uuid4()), "name": body["name"], "description": body.get("description"),
                   "data_type": body["data_type"], "created_at": now(), "modified_at": now(),
                   "example_count": 0, "session_count": 0, "metadata": (body.get("extra") or {}).get("metadata")}
        self.datasets[dataset["id"]] = dataset
        return 200, dataset

    def _dataset_view(self, dataset: dict[str, Any]) -> dict[str, Any]:
        count = sum(e["dataset_id"] == dataset["id"] for e in self.examples.values())
        return {**dataset, "example_count": count}

    def dataset_list(self, call: Request) -> tuple[int, Any]:
        name = (call.query.get("name") or [None])[0]
        return 200, [self._dataset_view(d) for d in self.datasets.values() if name is None or d["name"] == name]

    def dataset_read(self, call: Request, dataset_id: str) -> tuple[int, Any]:
        dataset = self.datasets.get(dataset_id)
        return (200, self._dataset_view(dataset)) if dataset else (404, {"detail": "Dataset not found"})

    def dataset_delete(self, call: Request, dataset_id: str) -> tuple[int, Any]:
        self.datasets.pop(dataset_id, None)
        return 200, {}

    def examples_upload(self, call: Request, dataset_id: str) -> tuple[int, Any]:
        if dataset_id not in self.datasets:
            return 404, {"detail": "Dataset not found"}
        created: dict[str, dict[str, Any]] = {}
        for name, headers, data in parse_multipart(call.body, call.headers["content-type"]):
            example_id, _, field = name.partition(".")
            example = created.setdefault(example_id, {"id": example_id, "dataset_id": dataset_id})
            if not field:
                body = json.loads(data)
                example.update({"created_at": body.get("created_at") or now(), "modified_at": now(),
                                "metadata": body.get("metadata"), "split": body.get("split")})
            elif field in ("inputs", "outputs"):
                example[field] = json.loads(data)
            elif field.startswith("attachment."):
                mime, _, length = headers["content-type"].partition(";")
                assert length.strip() == f"length={len(data)}", f"attachment length {length!r} != {len(data)}"
                self.attachments[(example_id, field.removeprefix("attachment."))] = (mime.strip(), data)
            else:
                raise AssertionError(f"unknown example part {name!r}")
        for example in created.values():
            assert "inputs" in example and "created_at" in example, f"incomplete example {example['id']}"
            self.examples[example["id"]] = example
        return 201, {"example_ids": list(created), "count": len(created), "as_of": now()}

    def example_list(self, call: Request) -> tuple[int, Any]:
        dataset = (call.query.get("dataset") or [None])[0]
        ids = set(call.query.get("id") or [])
        offset = int((call.query.get("offset") or ["0"])[0])
        limit = int((call.query.get("limit") or ["100"])[0])
        wanted = [e for e in self.examples.values()
                  if (dataset is None or e["dataset_id"] == dataset) and (not ids or e["id"] in ids)]
        page = []
        for example in wanted[offset:offset + limit]:
            view = {k: v for k, v in example.items() if k != "split"}
            if "attachment_urls" in (call.query.get("select") or []):
                view["attachment_urls"] = {
                    f"attachment.{name}": {"presigned_url": f"{self.url}/attachments/{ex}/{name}", "mime_type": mime}
                    for (ex, name), (mime, _) in self.attachments.items() if ex == example["id"]}
            page.append(view)
        return 200, page

    def attachment_read(self, call: Request, example_id: str, name: str) -> tuple[int, Any]:
        found = self.attachments.get((example_id, name))
        return (200, found[1]) if found else (404, {"detail": "Attachment not found"})

    def feedback_create(self, call: Request) -> tuple[int, Any]:
        body = call.json()
        self.feedback.append(body)
        return 200, body

    # ---------------------------------------------------------------- HTTP plumbing

    def _dispatch(self, call: Request) -> tuple[int, Any]:
        with self.lock:
            self.calls.append(call)
            if call.headers.get("x-api-key") != API_KEY and not call.path.startswith("/attachments/"):
                self.errors.append(f"{call.method} {call.path}: missing or wrong x-api-key")
                return 401, {"detail": "Invalid token"}
            for method, pattern, handler in self.routes:
                match = pattern.fullmatch(call.path)
                if method == call.method and match:
                    try:
                        return handler(call, *match.groups())
                    except (AssertionError, KeyError, ValueError) as exc:
                        self.errors.append(f"{call.method} {call.path}: {exc!r}")
                        return 422, {"detail": f"stand-in check failed: {exc}"}
            self.errors.append(f"unhandled {call.method} {call.path}?{call.query}")
            return 404, {"detail": "Not Found"}

    def _answer(self, call: Request) -> Reply:
        """Every request: its body decompressed (``Content-Encoding: zstd``), routed, answered as JSON or bytes."""
        if call.headers.get("content-encoding", "").lower() == "zstd":
            body = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(call.body), read_across_frames=True).read()
            call = replace(call, body=body)
        status, payload = self._dispatch(call)
        if isinstance(payload, bytes):
            return Reply(status, payload)
        return Reply(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})
