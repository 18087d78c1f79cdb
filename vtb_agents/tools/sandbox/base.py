"""The sandbox protocol: where model-written code runs, one sandbox per episode.

A sandbox owns one working directory (the DESIGN.md contract: task images as
``image_{i}.png``, results as ``transformed_image_{i}.png``) and keeps Python state across
``run`` calls, like a Jupyter kernel.
"""

from __future__ import annotations

import codecs
import collections
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

DEFAULT_TIMEOUT_S = 60.0
OUTPUT_CAP_CHARS = 20_000
"""stdout and stderr are each cut to this many characters (a note says how much was cut)."""


@dataclass
class ExecResult:
    """Outcome of one ``Sandbox.run`` call.

    ``ok`` is False when the code raised, timed out or killed its worker; ``error`` then says
    what happened in one line (exception type and message, or ``timeout after 30 s``).
    ``new_files`` lists files created or modified in the working directory by this call.
    """

    ok: bool
    stdout: str = ""
    stderr: str = ""
    new_files: list[str] = field(default_factory=list)
    error: str | None = None
    duration_s: float = 0.0
    state_lost: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of all fields."""
        return asdict(self)


@runtime_checkable
class Sandbox(Protocol):
    """What every sandbox backend offers (local worker process, E2B)."""

    workdir: Path
    isolation: str

    def run(self, code: str, timeout: float = DEFAULT_TIMEOUT_S) -> ExecResult:
        """Execute ``code`` in the persistent interpreter and report what happened."""
        ...

    def put_file(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` (relative to the working directory)."""
        ...

    def get_file(self, name: str) -> bytes:
        """Read ``name`` (relative to the working directory)."""
        ...

    def list_files(self) -> list[str]:
        """Names of the files in the working directory, sorted."""
        ...

    def close(self) -> None:
        """Stop the interpreter and free its resources; safe to call twice."""
        ...


def relative_name(name: str) -> PurePosixPath:
    """``name`` as a path relative to a working directory; ValueError if it could escape it."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise ValueError(f"file name {name!r} must be relative, inside the working directory")
    return path


class CappedText:
    """Decodes one output stream as it arrives, keeping only its head and tail.

    Memory stays bounded whatever the stream size; ``text()`` puts a note where it cut.
    """

    def __init__(self, cap: int = OUTPUT_CAP_CHARS) -> None:
        if cap < 2:
            raise ValueError(f"cap must be at least 2 characters, not {cap}")
        self.head_cap, self.tail_cap = cap // 2, cap - cap // 2
        self.head: list[str] = []
        self.tail: collections.deque[str] = collections.deque()
        self.head_len = self.tail_len = self.total = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> None:
        """Add raw UTF-8 bytes (a character may be split across calls)."""
        self.add(self.decoder.decode(data))

    def add(self, text: str) -> None:
        """Add decoded text."""
        self.total += len(text)
        if self.head_len < self.head_cap:
            taken = text[: self.head_cap - self.head_len]
            self.head.append(taken)
            self.head_len += len(taken)
            text = text[len(taken):]
        if text:
            self.tail.append(text)
            self.tail_len += len(text)
            while self.tail_len - len(self.tail[0]) >= self.tail_cap:
                self.tail_len -= len(self.tail.popleft())

    def text(self) -> str:
        """Head, a note saying how much was cut (if anything), tail."""
        self.add(self.decoder.decode(b"", final=True))
        head, tail = "".join(self.head), "".join(self.tail)
        if self.tail_len <= self.tail_cap:
            return head + tail
        cut = self.total - self.head_len - self.tail_cap
        return f"{head}\n[... {cut} more characters cut]\n{tail[-self.tail_cap:]}"
