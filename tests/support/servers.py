"""The one local HTTP server of the tests (``LocalServer``, real sockets on 127.0.0.1) and stand-ins of the
public APIs the network tools call (Open-Meteo, Tavily, SerpAPI) plus a web site and a folder of files.

Every HTTP service a test talks to is a ``LocalServer``: its routes answer what the stand-in of that
service answers (``support.openai_server``: the chat-completions API, ``support.langsmith_server``: LangSmith,
``add_*`` here). A server records what it receives; the stand-ins answer in the providers' real wire formats
and check the requests they get; a failed check answers HTTP 400 and is kept in ``server.errors`` (tests
assert it stays empty). ``serving`` runs any ``socketserver`` server (say the package's own) in a thread.
"""

from __future__ import annotations

import json
import mimetypes
import socketserver
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Request:
    """One request as the server saw it (header names lower-case, a chunked body joined)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What a route answers: a dict/list body is sent as JSON, str as HTML unless headers say otherwise.

    ``stream`` sends its pieces as they come, without a length, and closes the connection after the last
    (server-sent events); ``delay_s`` waits before answering (cut short when the server stops)."""

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stream: Iterable[bytes] | None = None

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, (dict, list)):
            return json.dumps(self.body, ensure_ascii=False).encode(), "application/json"
        if isinstance(self.body, str):
            return self.body.encode(), "text/html; charset=utf-8"
        return self.body, "application/octet-stream"


Handler = Callable[[Request], Reply]


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that treats a client hang-up as normal and records any other handler crash."""

    daemon_threads = True
    request_queue_size = 128  # parallel-call tests connect many clients at once (the default 5 resets some)
    owner: LocalServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):  # the client closed a kept-alive connection or gave up waiting
            return
        self.owner.errors.append(f"handler crashed: {exc!r}")
        super().handle_error(request, client_address)


@contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[socketserver.BaseServer]:
    """Serve ``server`` from a thread while the block runs; then stop it and close its port."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class LocalServer:
    """A threading HTTP/1.1 server on 127.0.0.1 (keep-alive, TCP_NODELAY as real servers) with routes by
    (method, path); ``fallback`` answers the requests no route takes (404 without one). Use it as a context
    manager. ``requests`` lists what it received, ``connections`` counts the client connections it accepted."""

    def __init__(self, fallback: Handler | None = None) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.fallback = fallback
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self.connections = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def route(self, path: str, handler: Handler, *, method: str = "GET") -> None:
        self.routes[(method, path)] = handler

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> LocalServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the port (idempotent); later connections are refused."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    def _dispatch(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
        handler = self.routes.get((request.method, request.path), self.fallback)
        if handler is None:
            return Reply(404, "<html><body><h1>Not Found</h1></body></html>")
        try:
            reply = handler(request)
        except AssertionError as exc:
            with self._lock:
                self.errors.append(f"{request.method} {request.path}: {exc}")
            return Reply(400, {"error": True, "reason": f"test server check failed: {exc}"})
        if reply.delay_s:
            self._stopping.wait(reply.delay_s)
        return reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real APIs
            disable_nagle_algorithm = True  # no 40 ms wait between a reply's header and its body

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("content-length") or 0))
                data = b""
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    data += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                return data

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                request = Request(self.command, parts.path, parse_qs(parts.query),
                                  {k.lower(): v for k, v in self.headers.items()}, self._body())
                reply = server._dispatch(request)
                body, content_type = reply.encoded()
                self.send_response(reply.status)
                if reply.stream is not None:
                    for name, value in {"Content-Type": content_type, **reply.headers, "Connection": "close"}.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.close_connection = True  # the end of the body is the end of the connection
                    for piece in reply.stream:
                        self.wfile.write(piece)
                    return
                headers = {"Content-Type": content_type, **reply.headers, "Content-Length": str(len(body))}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

        return _Handler


def add_directory(server: LocalServer, root: Path) -> None:
    """Serve the files under ``root`` for any GET no route takes (``index.html`` for a folder), as a static
    web host does: content type from the name, 404 for what is missing or outside ``root``."""
    base = root.resolve()

    def files(request: Request) -> Reply:
        if request.method != "GET":
            return Reply(405, "<html><body>Method Not Allowed</body></html>")
        target = (base / unquote(request.path).lstrip("/")).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(base) or not target.is_file():
            return Reply(404, "<html><body><h1>Not Found</h1></body></html>")
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return Reply(200, target.read_bytes(), {"Content-Type": kind})

    server.fallback = files


# ---------------------------------------------------------------- Open-Meteo (geocoding + archive)

ARCHIVE_DAILY = ["temperature_2m_max", "temperature_2m_min", "temperature_2m_mean", "precipitation_sum",
                 "wind_speed_10m_max", "weather_code"]
DAILY_UNITS = {"time": "iso8601", "temperature_2m_max": "°C", "temperature_2m_min": "°C",
               "temperature_2m_mean": "°C", "precipitation_sum": "mm", "wind_speed_10m_max": "km/h",
               "weather_code": "wmo code"}


def add_open_meteo(server: LocalServer, places: dict[str, list[dict[str, Any]]],
                   days: dict[tuple[float, float, str], dict[str, Any] | str]) -> None:
    """Serve /v1/search (geocoding by lower-case name) and /v1/archive (by latitude, longitude, date).

    A ``days`` value that is a string is answered as Open-Meteo's HTTP 400 ``{"error": true, "reason"}``.
    """
    def geocoding(request: Request) -> Reply:
        assert request.param("name"), "geocoding needs name"
        assert request.param("count") in ("1", "10"), f"count={request.param('count')}"
        assert request.param("language") == "en" and request.param("format") == "json", request.query
        found = places.get(request.param("name").lower(), [])
        return Reply(200, {"results": found, "generationtime_ms": 0.61} if found else {"generationtime_ms": 0.42})

    def archive(request: Request) -> Reply:
        expected = {"latitude", "longitude", "start_date", "end_date", "daily", "timezone"}
        assert set(request.query) == expected, f"archive params {sorted(request.query)}"
        assert request.param("daily").split(",") == ARCHIVE_DAILY, request.param("daily")
        assert request.param("timezone") == "auto", request.param("timezone")
        assert request.param("start_date") == request.param("end_date"), "one day per call"
        lat, lon = float(request.param("latitude")), float(request.param("longitude"))
        date = request.param("start_date")
        values = days.get((lat, lon, date))
        assert values is not None, f"no test data for {(lat, lon, date)}"
        if isinstance(values, str):
            return Reply(400, {"error": True, "reason": values})
        return Reply(200, {
            "latitude": round(lat, 2), "longitude": round(lon, 2), "generationtime_ms": 0.2,
            "utc_offset_seconds": 3600, "timezone": "Europe/Berlin", "timezone_abbreviation": "GMT+1",
            "elevation": 38.0, "daily_units": DAILY_UNITS,
            "daily": {"time": [date], **{name: [values.get(name)] for name in ARCHIVE_DAILY}},
        })

    server.route("/v1/search", geocoding)
    server.route("/v1/archive", archive)


# ---------------------------------------------------------------- search APIs

def add_tavily(server: LocalServer, api_key: str, results: list[dict[str, Any]]) -> None:
    """Serve POST /search like api.tavily.com: bearer key, JSON body; 401 with ``detail.error`` on a bad key."""
    def search(request: Request) -> Reply:
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return Reply(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
        assert request.headers.get("content-type", "").startswith("application/json"), request.headers
        body = request.json()
        assert isinstance(body.get("query"), str) and body["query"], body
        assert isinstance(body.get("max_results"), int) and 1 <= body["max_results"] <= 20, body
        hits = [{**r, "score": 0.9 - i / 100, "raw_content": None} for i, r in enumerate(results)]
        return Reply(200, {"query": body["query"], "follow_up_questions": None, "answer": None, "images": [],
                           "results": hits[: body["max_results"]], "response_time": 0.71,
                           "request_id": "123e4567-e89b-12d3-a456-426614174111"})

    server.route("/search", search, method="POST")


def add_serpapi(server: LocalServer, api_key: str, results: list[dict[str, Any]], empty_query: str) -> None:
    """Serve GET /search.json like serpapi.com (engine=google); ``empty_query`` gets Google's no-results answer."""
    def search(request: Request) -> Reply:
        if request.param("api_key") != api_key:
            return Reply(401, {"error": "Invalid API key. Your API key should be here: "
                                        "https://serpapi.com/manage-api-key"})
        assert request.param("engine") == "google" and request.param("q"), request.query
        metadata = {"id": "64b7a1", "status": "Success", "json_endpoint": "https://serpapi.com/searches/x.json",
                    "created_at": "2024-07-19 10:00:00 UTC", "total_time_taken": 1.2}
        params = {"engine": "google", "q": request.param("q"), "google_domain": "google.com", "device": "desktop"}
        if request.param("q") == empty_query:
            return Reply(200, {"search_metadata": metadata, "search_parameters": params,
                               "search_information": {"organic_results_state": "Fully empty"},
                               "error": "Google hasn't returned any results for this query."})
        organic = [{"position": i + 1, "title": r["title"], "link": r["url"],
                    "redirect_link": "https://www.google.com/url", "displayed_link": r["url"],
                    "snippet": r["content"], "source": "example"}
                   for i, r in enumerate(results)]
        return Reply(200, {"search_metadata": metadata, "search_parameters": params,
                           "search_information": {"organic_results_state": "Results for exact spelling",
                                                  "total_results": 1234},
                           "organic_results": organic})

    server.route("/search.json", search)


# ---------------------------------------------------------------- a small web site

ARTICLE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>The Tallest Tower</title>
<script>var tracking = "do not show";</script><style>body{color:#333}</style></head><body>
<nav><a href="/">Home</a> | <a href="/news">News</a> | <a href="/about">About us</a></nav>
<article><h1>The Tallest Tower</h1>
<p>The Eiffel Tower in Paris is 330 metres tall since a new antenna was added in 2022. It was completed in
1889 as the entrance arch of the World's Fair and was the tallest man-made structure for 41 years.</p>
<p>About seven million people visit the tower every year, which makes it one of the most visited paid
monuments in the world. Its wrought-iron lattice weighs roughly 7,300 tonnes.</p>
<p>The tower is repainted every seven years with about sixty tonnes of paint, a task that takes a team of
painters more than a year to finish by hand.</p></article>
<footer>Copyright 2024 Example News. All rights reserved.</footer></body></html>"""


def png_bytes(width: int = 2, height: int = 2) -> bytes:
    """A valid, tiny white PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\xff" * 3 * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def add_web_site(server: LocalServer, *, slow_s: float = 3.0) -> None:
    """/article, /old (301 to /article), /gone (404 via no route), /image.png, /paper.pdf, /slow,
    /flaky (500 on the first request, then the article), /long (a long article), /script-only, /notes.txt."""
    flaky_calls = {"n": 0}
    lock = threading.Lock()

    def flaky(_: Request) -> Reply:
        with lock:
            flaky_calls["n"] += 1
            first = flaky_calls["n"] == 1
        return Reply(500, "<html><body>Internal Server Error</body></html>") if first else Reply(200, ARTICLE_HTML)

    long_paragraphs = "".join(f"<p>Paragraph {i}: {'the quick brown fox jumps over the lazy dog ' * 8}</p>"
                              for i in range(200))
    server.route("/article", lambda _: Reply(200, ARTICLE_HTML))
    server.route("/old", lambda _: Reply(301, b"", {"Location": "/article"}))
    server.route("/image.png", lambda _: Reply(200, png_bytes(), {"Content-Type": "image/png"}))
    server.route("/paper.pdf", lambda _: Reply(200, b"%PDF-1.4\n%...", {"Content-Type": "application/pdf"}))
    server.route("/slow", lambda _: Reply(200, ARTICLE_HTML, delay_s=slow_s))
    server.route("/flaky", flaky)
    server.route("/long", lambda _: Reply(200, f"<html><head><title>Long</title></head><body><article>"
                                              f"{long_paragraphs}</article></body></html>"))
    server.route("/script-only", lambda _: Reply(200, "<html><head><title>App</title></head><body>"
                                                     "<script>render()</script></body></html>"))
    server.route("/notes.txt", lambda _: Reply(200, "line one\nline two\n",
                                               {"Content-Type": "text/plain; charset=utf-8"}))
