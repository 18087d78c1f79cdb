"""Small HTML helpers shared by the run report and the comparison page.

Every value from a task, a model or a judge is untrusted: it only reaches the page through
:func:`esc`. The page shell is ``templates/page.html`` filled with :class:`string.Template`,
with the stylesheet ``templates/report.css`` inlined and, where a page needs one, an inline script from
``templates/`` (no network fetches, no external files but the run directory's own).
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path
from string import Template
from typing import Any, Iterable, Sequence

TEMPLATES = Path(__file__).parent / "templates"


def esc(value: Any) -> str:
    """``value`` as text that is safe in HTML content and in quoted attributes."""
    return html.escape("" if value is None else str(value), quote=True)


def pct(value: float | None) -> str:
    """A 0..1 fraction as a percentage with one decimal, ``-`` when absent (like the paper)."""
    return "-" if value is None else f"{100 * value:.1f}%"


def interval(bounds: Sequence[float] | None) -> str:
    """A 0..1 interval as percentages with one decimal (``41.2–58.8``), ``-`` when absent."""
    return "-" if bounds is None else f"{100 * bounds[0]:.1f}–{100 * bounds[1]:.1f}"


def num(value: float | int | None, digits: int = 2) -> str:
    """A number for a table cell, ``-`` when absent."""
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", caption: str = "",
          row_classes: Sequence[str] | None = None) -> str:
    """An HTML table. ``headers`` (none: no header row) are escaped here; row cells must already be
    HTML (use :func:`esc`)."""
    head = f'<thead><tr>{"".join(f"<th>{esc(h)}</th>" for h in headers)}</tr></thead>' if headers else ""
    body = "".join(
        (f'<tr class="{esc(row_classes[i])}">' if row_classes else "<tr>")
        + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for i, row in enumerate(rows))
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<table class="{esc(cls)}">{cap}{head}<tbody>{body}</tbody></table>'


def badge(text: str, kind: str) -> str:
    """A coloured label (``kind`` is a CSS class such as ``pass``, ``fail``, ``met``)."""
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


def pre(text: str, *, limit: int = 20_000, cls: str = "") -> str:
    """``text`` in an escaped ``<pre>``, cut at ``limit`` characters with a note (keeps the page small)."""
    more = ""
    if len(text) > limit:
        more = f'\n<span class="note">… {len(text) - limit} more characters not shown</span>'
        text = text[:limit]
    return f'<pre class="{esc(cls)}">{esc(text)}{more}</pre>'


@cache
def _template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def page(title: str, body: str, *, script: str | None = None) -> str:
    """A complete, self-contained HTML document (``body`` is HTML, ``title`` text); ``script`` names
    a file of ``templates/`` inlined at the end of the body (our own code, never data)."""
    inline = f"<script>\n{_template(script)}</script>" if script else ""
    return Template(_template("page.html")).substitute(
        title=esc(title), css=_template("report.css"), body=body, script=inline)
