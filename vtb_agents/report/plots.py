"""Plots of a run or of several runs, as inline SVG (matplotlib, Agg/SVG backends, no pyplot state).

Inline SVG keeps the page self-contained and sharp at any zoom, and is small for bar and scatter
charts. Text stays text (``svg.fonttype: none``) so the page's fonts are used.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any, Sequence

import matplotlib

matplotlib.use("Agg")  # never a GUI backend, even if pyplot is imported elsewhere

from matplotlib.figure import Figure  # noqa: E402

from vtb_agents.analysis.image_ops import IMAGE_OPS  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

BAR = "#2f6fb2"
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)  # RDF boilerplate with URIs; not needed
RC: dict[RcKeyType, Any] = {"svg.fonttype": "none", "font.size": 10, "axes.spines.top": False,
                            "axes.spines.right": False}


def to_svg(fig: Figure) -> str:
    """``fig`` as an ``<svg>`` element for inlining (XML prolog and DOCTYPE removed)."""
    out = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(out, format="svg", bbox_inches="tight")
    text = out.getvalue()
    return _METADATA.sub("", text[text.index("<svg"):])


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def bar_svg(labels: Sequence[str], values: Sequence[float], *, title: str, ylabel: str,
            percent: bool = False, notes: Sequence[str] | None = None) -> str:
    """A vertical bar chart; ``percent`` shows 0..1 values as 0..100 %. ``notes`` label each bar."""
    with matplotlib.rc_context(RC):
        fig = _figure(max(4.0, 0.9 * len(labels) + 1.5), 3.2)
        ax = fig.add_subplot()
        shown = [100 * v for v in values] if percent else list(values)
        bars = ax.bar(range(len(labels)), shown, color=BAR, width=0.65)
        ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 4 else 0, ha="right"
                      if len(labels) > 4 else "center")
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
        ax.set_ylabel(ylabel)
        if percent:
            ax.set_ylim(0, 118)  # room for the labels above 100 % bars
            ax.set_yticks(range(0, 101, 20))
        top = max(shown, default=0) or 1
        for bar, value, note in zip(bars, shown, notes or [""] * len(shown)):
            text = (f"{value:.0f}%" if percent else f"{value:g}") + (f"\n{note}" if note else "")
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, value), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)
        if not percent:
            ax.set_ylim(0, top * 1.25)
        ax.grid(axis="y", alpha=0.3)
        return to_svg(fig)


def apr_by_category_svg(summary: dict[str, Any]) -> str | None:
    """APR per category (bars labelled with graded counts); None when no category has a graded task."""
    rows = [(name, block) for name, block in summary.get("by_category", {}).items() if block.get("apr") is not None]
    if not rows:
        return None
    return bar_svg([name for name, _ in rows], [block["apr"] for _, block in rows], title="APR by category",
                   ylabel="APR (%)", percent=True, notes=[f"n={block['graded']}" for _, block in rows])


def image_ops_svg(summary: dict[str, Any]) -> str | None:
    """How often each image operation occurs in vision-tool code; None when there was no vision call."""
    ops = summary.get("tool_metrics", {}).get("image_ops") or {}
    names = [op for op in IMAGE_OPS if op in ops] + sorted(set(ops) - set(IMAGE_OPS))
    if not any(isinstance(ops.get(op), (int, float)) and ops.get(op) for op in names):
        return None
    counts = [float(ops.get(op) or 0) for op in names]
    return bar_svg(names, counts, title="Image operations in python_image_processing code", ylabel="occurrences")


def scatter_svg(points: Sequence[tuple[str, float | None, float | None]], *, xlabel: str, ylabel: str,
                title: str, x_percent: bool = False) -> str | None:
    """A scatter of labelled runs (``label, x, y`` with y a 0..1 rate); None if no point has both values."""
    merged: dict[tuple[float, float], list[str]] = {}
    for label, x, y in points:  # runs at the same point share one dot and one label
        if x is not None and y is not None:
            merged.setdefault((100 * x if x_percent else x, 100 * y), []).append(label)
    if not merged:
        return None
    with matplotlib.rc_context(RC):
        fig = _figure(5.2, 3.8)
        ax = fig.add_subplot()
        ax.scatter([x for x, _ in merged], [y for _, y in merged], color=BAR, s=36, zorder=3)
        for (x, y), labels in merged.items():
            ax.annotate(", ".join(labels), (x, y), xytext=(5, 4), textcoords="offset points", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
        ax.set_ylim(0, 105)
        top = max(x for x, _ in merged)
        ax.set_xlim(0, 105 if x_percent else max(1.0, top) * 1.3)  # from zero: no tool use is a real value
        ax.grid(alpha=0.3)
        return to_svg(fig)
