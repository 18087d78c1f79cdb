"""Settings, failure type and the retrying HTTP helper shared by the network tools."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import httpx

log = logging.getLogger(__name__)

Mode = Literal["live", "record", "replay"]
SearchBackend = Literal["ddgs", "tavily", "serpapi"]
T = TypeVar("T")

BROWSER_USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 10.0


def default_search_backend() -> SearchBackend:
    """VTB_SEARCH_BACKEND, else tavily / serpapi when their key is set, else the keyless ddgs."""
    chosen = os.environ.get("VTB_SEARCH_BACKEND", "").strip().lower()
    if chosen:
        return chosen  # type: ignore[return-value]  # checked in NetworkSettings.__post_init__
    if os.environ.get("TAVILY_API_KEY"):
        return "tavily"
    if os.environ.get("SERPAPI_API_KEY"):
        return "serpapi"
    return "ddgs"


@dataclass(frozen=True)
class NetworkSettings:
    """How the network tools reach the world, and whether they record or replay their results."""

    cache_path: Path | None = None
    mode: Mode = "live"
    search_backend: SearchBackend = field(default_factory=default_search_backend)
    timeout_s: float = 20.0
    retries: int = 2
    backoff_s: float = 0.5
    """First retry waits this long; each later retry waits twice as long as the one before."""
    geocoding_url: str = "https://geocoding-api.open-meteo.com/v1/search"
    archive_url: str = "https://archive-api.open-meteo.com/v1/archive"
    tavily_url: str = "https://api.tavily.com"
    serpapi_url: str = "https://serpapi.com"
    tavily_api_key: str | None = field(default_factory=lambda: os.environ.get("TAVILY_API_KEY"), repr=False)
    serpapi_api_key: str | None = field(default_factory=lambda: os.environ.get("SERPAPI_API_KEY"), repr=False)
    page_text_max_chars: int = 8000
    max_download_bytes: int = 5_000_000
    allow_private_urls: bool = False
    """Let browser_get_page_text fetch loopback / private / link-local hosts (off: the model picks URLs)."""
    user_agent: str = BROWSER_USER_AGENT

    def __post_init__(self) -> None:
        if self.cache_path is not None and not isinstance(self.cache_path, Path):
            object.__setattr__(self, "cache_path", Path(self.cache_path))
        if self.mode not in get_args(Mode):
            raise ValueError(f"mode must be one of {get_args(Mode)}, not {self.mode!r}")
        if self.search_backend not in get_args(SearchBackend):
            raise ValueError(f"search backend must be one of {get_args(SearchBackend)}, not {self.search_backend!r}")
        if self.mode != "live" and self.cache_path is None:
            raise ValueError(f"mode {self.mode!r} needs a cache_path")
        if self.retries < 0 or self.timeout_s <= 0 or self.page_text_max_chars < 1:
            raise ValueError("retries must be >= 0, timeout_s > 0 and page_text_max_chars >= 1")


class ToolFailure(Exception):
    """A tool call failed with a message for the model.

    ``deterministic`` failures (unknown place, HTTP 404, not a web page) depend only on the arguments, so
    record mode stores them; transient ones (timeouts, 5xx, quota, missing keys) are never stored.
    """

    def __init__(self, message: str, *, deterministic: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.deterministic = deterministic


def dump(payload: Any) -> str:
    """Compact JSON text: the one serialisation every network tool result uses."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def public_url(url: httpx.URL | str) -> str:
    """The URL without its query string, so API keys never reach a message."""
    return str(httpx.URL(str(url)).copy_with(query=None, fragment=None))


def with_retries(settings: NetworkSettings, attempt: Callable[[], T], *, retryable: Callable[[Exception], bool],
                 what: str) -> T:
    """Run ``attempt`` up to ``1 + settings.retries`` times with exponential backoff on retryable errors."""
    for number in range(settings.retries + 1):
        try:
            return attempt()
        except Exception as exc:
            if number >= settings.retries or not retryable(exc):
                raise
            wait = settings.backoff_s * 2**number
            if isinstance(exc, _RetryableStatus) and exc.retry_after is not None:
                wait = max(wait, min(exc.retry_after, MAX_RETRY_AFTER_S))
            log.info("%s failed (%s); retry %d/%d in %.2fs", what, exc, number + 1, settings.retries, wait)
            time.sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises


class _RetryableStatus(Exception):
    """An HTTP answer worth retrying (429, 5xx); carries the response for the final message."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response
        header = response.headers.get("retry-after", "")
        self.retry_after = float(header) if header.replace(".", "", 1).isdigit() else None


def _retryable(exc: Exception) -> bool:
    transient = (_RetryableStatus, httpx.TimeoutException, httpx.TransportError)
    return isinstance(exc, transient) and not isinstance(exc, httpx.UnsupportedProtocol)


def _refuse_private_hosts(request: httpx.Request) -> None:
    """Request hook: refuse hosts that resolve to loopback, private, link-local or reserved addresses."""
    host = request.url.host
    try:
        infos = socket.getaddrinfo(host, request.url.port or 80, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise httpx.ConnectError(f"cannot resolve host {host!r}: {exc.strerror}", request=request) from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global:
            raise ToolFailure(f"refusing to fetch {host} ({address}): not a public internet address",
                              deterministic=True)


_SSL_LOCK = threading.Lock()
_SSL: list[ssl.SSLContext] = []


def _ssl_context() -> ssl.SSLContext:
    """One certificate store for all clients (loading it is most of the cost of a new client)."""
    with _SSL_LOCK:  # held while loading, so parallel first calls load it once
        if not _SSL:
            _SSL.append(httpx.create_ssl_context())
        return _SSL[0]


def client(settings: NetworkSettings, *, public_only: bool = False) -> httpx.Client:
    """An httpx client with the settings' timeout and user agent; ``public_only`` guards model-chosen URLs."""
    hooks = {"request": [_refuse_private_hosts]} if public_only and not settings.allow_private_urls else {}
    return httpx.Client(timeout=settings.timeout_s, follow_redirects=True, event_hooks=hooks, verify=_ssl_context(),
                        headers={"User-Agent": settings.user_agent, "Accept-Language": "en;q=0.9,*;q=0.5"})


@contextmanager
def open_stream(settings: NetworkSettings, http: httpx.Client, method: str, url: str,
                **kwargs: Any) -> Iterator[httpx.Response]:
    """Open a streamed response with retries on connect errors, timeouts, 429 and 5xx.

    The response is yielded unread (status may be any non-retryable code); network failures after the
    last retry become a transient ToolFailure that names the host, never the query string.
    """
    def attempt() -> httpx.Response:
        response = http.send(http.build_request(method, url, **kwargs), stream=True)
        if response.status_code in RETRY_STATUSES:
            response.read()
            response.close()
            raise _RetryableStatus(response)
        return response

    try:
        response = with_retries(settings, attempt, retryable=_retryable, what=f"{method} {public_url(url)}")
    except _RetryableStatus as exc:
        raise ToolFailure(f"{public_url(exc.response.url)} answered HTTP {exc.response.status_code}"
                          f"{_detail(exc.response)} after {settings.retries + 1} attempts") from None
    except httpx.TimeoutException:
        raise ToolFailure(f"{public_url(url)} did not answer within {settings.timeout_s:g} s "
                          f"({settings.retries + 1} attempts)") from None
    except httpx.RequestError as exc:  # connect errors, unsupported redirect targets, too many redirects
        raise ToolFailure(f"could not reach {public_url(url)}: {type(exc).__name__}: {exc}") from None
    try:
        yield response
    except httpx.TimeoutException:
        raise ToolFailure(f"{public_url(url)} stopped sending data for {settings.timeout_s:g} s") from None
    except httpx.RequestError as exc:
        raise ToolFailure(f"reading {public_url(url)} failed: {type(exc).__name__}: {exc}") from None
    finally:
        response.close()


def request_json(settings: NetworkSettings, method: str, url: str, **kwargs: Any) -> tuple[int, Any]:
    """Send one API request with retries; return (status, parsed JSON body or None when not JSON)."""
    with client(settings) as http, open_stream(settings, http, method, url, **kwargs) as response:
        response.read()
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None


def _detail(response: httpx.Response) -> str:
    """A short excerpt of an error body for messages (API error text), or nothing."""
    text = response.text.strip().replace("\n", " ")
    return f": {text[:200]}" if text else ""


def error_text(body: Any, *paths: tuple[str, ...]) -> str | None:
    """The first string found in a JSON error body along the given key paths (APIs nest it differently)."""
    for path in paths:
        value: Any = body
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value:
            return value
    return None
