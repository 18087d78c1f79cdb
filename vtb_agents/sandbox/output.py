"""Bounded capture of a code call's output streams, shared by the sandbox backends."""

from __future__ import annotations

import codecs
import collections

from .base import OUTPUT_CAP_CHARS


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
