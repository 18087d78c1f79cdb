"""Record/replay of network tool results in a JSON-lines cassette, so a run can be repeated offline.

Cassette format (UTF-8, one JSON object per line)::

    {"format": "vtb-tool-cassette", "version": 1}
    {"tool": "web_search", "args": {"num_results": 5, "query": "eiffel tower height"}, "result": {...}}
    {"tool": "historical_weather", "args": {"date": "2024-01-15", "location": "atlantis"}, "error": "..."}

An entry is keyed by the tool name and its normalised arguments (see ``normalise_*``; stored sorted by
name); when a key repeats the last line wins. ``result`` is the tool's JSON result as an object, its key
order kept, so a replayed result is byte-identical to the live one; ``error`` is the message of a
deterministic failure (unknown place, HTTP 404/410, not a web page, an API's HTTP 400). Transient failures
(timeouts, connection errors, 429, 5xx, 401/403, missing keys, archive days not yet available) are never
stored, so a later recording can fill them in. Argument checks (date format, future dates, URL scheme)
run before the cassette is consulted and are never stored either.

Modes: ``live`` does not touch the cassette; ``record`` answers from the cassette when it holds the key and
otherwise calls live and appends (so an interrupted recording resumes; delete an entry to refresh it);
``replay`` never calls live, and a missing key is an error result. Appends are single flushed writes under
a per-file lock shared by every ToolCache of the process; ``compact_cassette`` sorts and de-duplicates a
cassette so that a shipped one is byte-stable.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ParamSpec
from urllib.parse import urlsplit, urlunsplit

from langchain_core.tools import ToolException

from vtb_agents.tools.network.http import Mode, ToolFailure, dump

log = logging.getLogger(__name__)

P = ParamSpec("P")
HEADER = {"format": "vtb-tool-cassette", "version": 1}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_text(text: str) -> str:
    """Key form of free text (queries, place names): trimmed, lower-case, single spaces."""
    return re.sub(r"\s+", " ", text).strip().lower()


def normalise_url(url: str) -> str:
    """Key form of a URL: lower-case scheme and host, default port and fragment dropped, '/' for no path."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a malformed port: keep the URL as written; the fetch will report it
        return url.strip()
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username or parts.password:
        netloc = f"{parts.username or ''}{':' + parts.password if parts.password else ''}@{netloc}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def cache_key(tool: str, args: Mapping[str, Any]) -> str:
    """The stable, human-readable key of one call: ``tool({"arg": value, ...})`` with sorted arguments."""
    return f"{tool}({json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(',', ':'))})"


class _Cassette:
    """One cassette file: its entries in memory, and the lock that serialises appends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.entries: dict[str, dict[str, Any]] = {}
        self.in_flight: dict[str, threading.Lock] = {}
        self.seen: tuple[int, int] | None = None

    def _stat(self) -> tuple[int, int] | None:
        if not self.path.exists():
            return None
        stat = self.path.stat()
        return stat.st_size, stat.st_mtime_ns

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The entry of ``key``, re-reading the file first when something else changed it."""
        with self.lock:
            stat = self._stat()
            if stat != self.seen:
                self.entries = read_entries(self.path) if stat else {}
                self.seen = stat
            return self.entries.get(key)

    def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            before = self._stat()
            new = before is None or before[0] == 0
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write((json.dumps(HEADER) + "\n" if new else "") + line)
                handle.flush()
            if self.seen == before:  # nobody else wrote in between: the in-memory view stays complete
                self.seen = self._stat()
            self.entries[cache_key(entry["tool"], entry["args"])] = entry


_CASSETTES: dict[Path, _Cassette] = {}
_CASSETTES_LOCK = threading.Lock()


def _cassette(path: Path) -> _Cassette:
    """The process-wide cassette object of ``path`` (so every tool set shares one lock and one view)."""
    resolved = path.expanduser().resolve()
    with _CASSETTES_LOCK:
        if resolved not in _CASSETTES:
            _CASSETTES[resolved] = _Cassette(resolved)
        return _CASSETTES[resolved]


def read_entries(path: Path) -> dict[str, dict[str, Any]]:
    """Entries of a cassette file by key (last line wins); a malformed line is a ValueError naming it."""
    entries: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
        if entry.get("format") == HEADER["format"]:
            if entry.get("version") != HEADER["version"]:
                raise ValueError(f"{path}:{number}: unsupported cassette version {entry.get('version')!r}")
            continue
        if not isinstance(entry.get("tool"), str) or not isinstance(entry.get("args"), dict) or not (
                ("result" in entry) ^ ("error" in entry)):
            raise ValueError(f"{path}:{number}: an entry needs 'tool', 'args' and one of 'result' / 'error'")
        entries[cache_key(entry["tool"], entry["args"])] = entry
    return entries


def compact_cassette(path: Path) -> int:
    """Rewrite a cassette sorted by key with one entry per key; return the number of entries."""
    entries = read_entries(path)
    lines = [json.dumps(HEADER)] + [json.dumps(entries[k], ensure_ascii=False) for k in sorted(entries)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(entries)


def tool_errors(func: Callable[P, str]) -> Callable[P, str]:
    """Turn every failure of a tool function into a ToolException, which LangChain reports to the model as
    an error ToolMessage (``handle_tool_error``): a network tool never raises into the graph."""
    @functools.wraps(func)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return func(*args, **kwargs)
        except ToolFailure as failure:
            raise ToolException(dump({"error": failure.message})) from None
        except Exception as exc:  # a backend bug or an unexpected library error: report it, never crash
            log.warning("%s failed unexpectedly", func.__name__, exc_info=True)
            raise ToolException(dump({"error": f"{func.__name__} failed: {type(exc).__name__}: {exc}"})) from exc

    return guarded


class ToolCache:
    """Runs a tool's backend call under the mode: live, record (fill the cassette) or replay (cassette only)."""

    def __init__(self, path: Path | None, mode: Mode) -> None:
        if mode != "live" and path is None:
            raise ValueError(f"mode {mode!r} needs a cassette path")
        self.path = path
        self.mode = mode

    def run(self, tool: str, key_args: Mapping[str, Any], live: Callable[[], str]) -> str:
        """The result text of one call under the mode; a ToolFailure when it failed or is not recorded.

        ``key_args`` are the normalised arguments that identify the call; ``live`` performs it.
        """
        return self._run(tool, dict(sorted(key_args.items())), live)

    def _run(self, tool: str, args: dict[str, Any], live: Callable[[], str]) -> str:
        if self.mode == "live" or self.path is None:
            return live()
        cassette = _cassette(self.path)
        key = cache_key(tool, args)
        if self.mode == "replay":
            return self._answer(cassette, key, missing=lambda: self._miss(key))
        with cassette.lock:
            key_lock = cassette.in_flight.setdefault(key, threading.Lock())
        with key_lock:  # parallel calls with one key fetch once; other keys proceed in parallel
            return self._answer(cassette, key, missing=lambda: self._record(cassette, tool, args, live))

    @staticmethod
    def _answer(cassette: _Cassette, key: str, *, missing: Callable[[], str]) -> str:
        entry = cassette.lookup(key)
        if entry is None:
            return missing()
        if "error" in entry:
            raise ToolFailure(entry["error"], deterministic=True)
        result = entry["result"]
        return result if isinstance(result, str) else dump(result)

    def _miss(self, key: str) -> str:
        where = f"{self.path}" if self.path and self.path.exists() else f"{self.path} (the file does not exist)"
        raise ToolFailure(f"no recorded result for {key} in {where}; record it with --tools-mode record")

    @staticmethod
    def _record(cassette: _Cassette, tool: str, args: dict[str, Any], live: Callable[[], str]) -> str:
        try:
            text = live()
        except ToolFailure as failure:
            if failure.deterministic:
                cassette.append({"tool": tool, "args": args, "error": failure.message})
            raise
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = None
        result = parsed if isinstance(parsed, (dict, list)) else text
        cassette.append({"tool": tool, "args": args, "result": result})
        return text
