"""The fenced code blocks of the documentation (docs/**/*.md and README.md), with the mark that says how each is
checked: run by tests/test_docs_code.py (no mark), run by a named test (``<!-- run-by: tests/FILE.py::NAME -->``),
or not runnable (``<!-- not-runnable: REASON -->``), the mark on the line right before the block."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*$")
MARK = re.compile(r"^[ \t]*<!-- (?P<kind>run-by|not-runnable): (?P<text>.*?) -->[ \t]*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the project), first line (1-based), language, code and mark."""

    page: str
    line: int
    lang: str
    code: str
    mark: str | None = None  # "run-by" or "not-runnable"
    mark_text: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    """Every Markdown page of the docs, and the README."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def code_blocks(page: Path) -> list[Block]:
    """The page's fenced blocks in order; raises ValueError on a fence that is never closed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    name = page.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, start = opening.group("indent"), i
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{name}:{i + 1}: a ``` block that is never closed")
        code = "\n".join(line.removeprefix(indent) for line in lines[start + 1:end]) + "\n"
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(before)
        blocks.append(Block(name, start + 1, opening.group("lang"), code,
                            mark.group("kind") if mark else None, mark.group("text").strip() if mark else ""))
        i = end + 1
    return blocks


def page_blocks(page: str, lang: str) -> list[Block]:
    """The ``lang`` blocks of one page (``docs/...`` or ``README.md``), for the tests that run them."""
    return [b for b in code_blocks(ROOT / page) if b.lang == lang]
