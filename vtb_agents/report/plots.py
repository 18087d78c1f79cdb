"""Charts of a run or of several runs, as small inline SVG written directly (no plotting library).

Inline SVG keeps the page self-contained and sharp at any zoom; text stays text, in the page's font.

Why not matplotlib: importing it costs 0.5-1 s and drawing these charts another ~0.3-0.9 s, and
``report.html`` is written after the last result of every ``vtb run``, on the command's critical
path, for two bar charts (and a scatter on the comparison page). Axes, ticks, gridlines and labels
are a few dozen lines of SVG. Every label is user data (task, model, run names) and is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from vtb_agents.analysis.image_ops import IMAGE_OPS
from vtb_agents.analysis.pareto import CostPoint, pareto_front
from vtb_agents.report.markup import esc
from vtb_agents.rundir.records import RunSummary

BAR = "#2f6fb2"
FRONT = "#c2410c"
"""Colour of the Pareto front's points and line (not used elsewhere in the report)."""
GRID = "#d9d9d9"
FONT = 12
"""Font size (px) of tick and value labels; titles are a little larger."""
CHAR = 0.6 * FONT
"""The typical width (px) of a character, to leave room for labels."""
SVG_NS = "http://www.w3.org/2000/svg"


@dataclass(frozen=True)
class Frame:
    """The plotting area of a chart in SVG pixels, and the data ranges it shows (from zero)."""

    left: float
    top: float
    width: float
    height: float
    x_max: float
    y_max: float

    def x(self, value: float) -> float:
        """The SVG x of data value ``value``."""
        return self.left + self.width * value / self.x_max

    def y(self, value: float) -> float:
        """The SVG y of data value ``value`` (SVG y grows downwards)."""
        return self.top + self.height * (1 - value / self.y_max)

    @property
    def bottom(self) -> float:
        """The SVG y of the x axis."""
        return self.top + self.height


def _n(value: float) -> str:
    """A coordinate for the SVG text: two decimals at most, no trailing zeros."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, text: str, *, anchor: str = "middle", size: int = FONT, extra: str = "") -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}"{extra}>'
            f"{esc(text)}</text>")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 up to at least ``top`` (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    top = top if top > 0 else 1.0
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [round(i * step, 10) for i in range(math.ceil(top / step - 1e-9) + 1)]


def _tick(value: float) -> str:
    return f"{value:g}"


def _axes(frame: Frame, *, x_ticks: Sequence[float] | None, y_ticks: Sequence[float], xlabel: str,
          ylabel: str, title: str) -> list[str]:
    """Title, gridlines, tick labels, axis lines and axis labels of ``frame``."""
    parts = [_text(16, 18, title, anchor="start", size=FONT + 2, extra=' font-weight="bold"')]
    for value in y_ticks:
        y = frame.y(value)
        parts.append(f'<line class="grid" x1="{_n(frame.left)}" y1="{_n(y)}" x2="{_n(frame.left + frame.width)}" '
                     f'y2="{_n(y)}" stroke="{GRID}"/>')
        parts.append(_text(frame.left - 6, y + 4, _tick(value), anchor="end"))
    for value in x_ticks or []:
        x = frame.x(value)
        parts.append(f'<line class="grid" x1="{_n(x)}" y1="{_n(frame.top)}" x2="{_n(x)}" y2="{_n(frame.bottom)}" '
                     f'stroke="{GRID}"/>')
        parts.append(_text(x, frame.bottom + 16, _tick(value)))
    parts.append(f'<path d="M{_n(frame.left)} {_n(frame.top)}V{_n(frame.bottom)}H{_n(frame.left + frame.width)}" '
                 'fill="none" stroke="#333"/>')
    middle = frame.top + frame.height / 2
    parts.append(_text(14, middle, ylabel, extra=f' transform="rotate(-90 14 {_n(middle)})"'))
    if xlabel:
        parts.append(_text(frame.left + frame.width / 2, frame.bottom + 36, xlabel))
    return parts


def _svg(width: float, height: float, title: str, parts: Sequence[str]) -> str:
    return (f'<svg xmlns="{SVG_NS}" width="{_n(width)}" height="{_n(height)}" '
            f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{esc(title)}">'
            f"<title>{esc(title)}</title>{''.join(parts)}</svg>")


def _error_bar(frame: Frame, center: float, half_width: float, low: float, high: float) -> str:
    """A whisker from ``low`` to ``high`` (data values) at ``center``, with caps ``half_width`` wide."""
    y_low, y_high = frame.y(low), frame.y(high)
    caps = "".join(f"M{_n(center - half_width)} {_n(y)}H{_n(center + half_width)}" for y in (y_low, y_high))
    return (f'<path class="errorbar" d="M{_n(center)} {_n(y_low)}V{_n(y_high)}{caps}" stroke="#222" '
            f'stroke-width="1.5" fill="none" data-low="{low:g}" data-high="{high:g}"/>')


def bar_svg(labels: Sequence[str], values: Sequence[float], *, title: str, ylabel: str,
            percent: bool = False, notes: Sequence[str] | None = None,
            errors: Sequence[Sequence[float] | None] | None = None) -> str:
    """A vertical bar chart; ``percent`` shows 0..1 values as 0..100 %. ``notes`` label each bar;
    ``errors`` give each bar an error bar from its ``[low, high]`` (same units as ``values``; None: none).

    Each bar is labelled above with its value (and its note on a second line), above its error bar;
    with more than four bars the category labels are rotated so that long names do not overlap.
    """
    scale = 100.0 if percent else 1.0
    shown = [scale * v for v in values]
    whiskers = [None if e is None else (scale * e[0], scale * e[1]) for e in (errors or [None] * len(values))]
    rotate = len(labels) > 4
    width = max(300.0, 72.0 * len(labels))
    longest = CHAR * max((len(label) for label in labels), default=0)
    label_room = 0.5 * longest + FONT if rotate else 22.0  # sin 30° of a label rotated by 30°
    left = max(60.0, 0.87 * CHAR * len(labels[0]) - width / len(labels) / 2 + 8) if rotate else 60.0
    frame = Frame(left=left, top=36 + (14 if notes else 0), width=width, height=200, x_max=max(1, len(labels)),
                  y_max=118 if percent else (max([*shown, *(w[1] for w in whiskers if w)], default=0) or 1) * 1.25)
    y_ticks = list(range(0, 101, 20)) if percent else [t for t in nice_ticks(frame.y_max / 1.25)
                                                         if t <= frame.y_max]
    parts = _axes(frame, x_ticks=None, y_ticks=y_ticks, xlabel="", ylabel=ylabel, title=title)
    step = frame.width / max(1, len(labels))
    for i, (label, value, note, whisker) in enumerate(zip(labels, shown, notes or [""] * len(shown), whiskers)):
        center = frame.left + step * (i + 0.5)
        top = frame.y(max(0.0, value))
        parts.append(f'<rect class="bar" x="{_n(center - 0.325 * step)}" y="{_n(top)}" width="{_n(0.65 * step)}" '
                     f'height="{_n(frame.bottom - top)}" fill="{BAR}" data-value="{value:g}"/>')
        if whisker is not None:
            parts.append(_error_bar(frame, center, 0.12 * step, *whisker))
            top = min(top, frame.y(whisker[1]))
        lines = [f"{value:.0f}%" if percent else f"{value:g}"] + ([note] if note else [])
        for j, line in enumerate(lines):  # the last line sits just above the bar
            parts.append(_text(center, top - 4 - 14 * (len(lines) - 1 - j), line, size=FONT - 1,
                               extra=' class="value"'))
        y = frame.bottom + 16
        rotation = f' transform="rotate(-30 {_n(center)} {_n(y)})"' if rotate else ""
        parts.append(_text(center, y, label, anchor="end" if rotate else "middle", extra=f' class="xtick"{rotation}'))
    return _svg(frame.left + frame.width + 16, frame.bottom + label_room + 8, title, parts)


def apr_by_category_svg(summary: RunSummary) -> str | None:
    """APR per category (bars labelled with graded counts) with its 95% interval as an error bar
    where there is one; None when no category has a graded task."""
    rows = [(name, block) for name, block in summary.by_category.items() if block.apr is not None]
    if not rows:
        return None
    intervals = any(block.apr_ci95 is not None for _, block in rows)
    return bar_svg([name for name, _ in rows], [block.apr or 0.0 for _, block in rows],
                   title="APR by category" + (" (error bars: 95% CI)" if intervals else ""), ylabel="APR (%)",
                   percent=True, notes=[f"n={block.graded}" for _, block in rows],
                   errors=[block.apr_ci95 for _, block in rows])


def image_ops_svg(summary: RunSummary) -> str | None:
    """How often each image operation occurs in vision-tool code; None when there was no vision call."""
    ops = summary.tool_metrics.image_ops
    names = [op for op in IMAGE_OPS if op in ops] + sorted(set(ops) - set(IMAGE_OPS))
    if not any(ops[op] for op in names):
        return None
    return bar_svg(names, [float(ops[op]) for op in names], title="Image operations in python_image_processing code",
                   ylabel="occurrences")


def scatter_svg(points: Sequence[tuple[str, float | None, float | None]], *, xlabel: str, ylabel: str,
                title: str, x_percent: bool = False) -> str | None:
    """A scatter of labelled runs (``label, x, y`` with y a 0..1 rate); None if no point has both values.

    Both axes start at zero (no tool use is a real value); runs at the same point share one dot
    and one label.
    """
    merged: dict[tuple[float, float], list[str]] = {}
    for label, x, y in points:
        if x is not None and y is not None:
            merged.setdefault((100 * x if x_percent else x, 100 * y), []).append(label)
    if not merged:
        return None
    top = max(x for x, _ in merged)
    x_max = 105 if x_percent else max(1.0, top) * 1.3
    frame = Frame(left=60, top=36, width=400, height=260, x_max=x_max, y_max=105)
    x_ticks = [t for t in (range(0, 101, 20) if x_percent else nice_ticks(x_max)) if t <= x_max]
    parts = _axes(frame, x_ticks=x_ticks, y_ticks=range(0, 101, 20), xlabel=xlabel, ylabel=ylabel, title=title)
    for (x, y), labels in merged.items():
        cx, cy = frame.x(x), frame.y(y)
        parts.append(f'<circle class="point" cx="{_n(cx)}" cy="{_n(cy)}" r="4" fill="{BAR}" '
                     f'data-x="{x:g}" data-y="{y:g}"/>')
        parts.append(_text(cx + 6, cy - 5, ", ".join(labels), anchor="start", size=FONT - 1, extra=' class="label"'))
    right = max(16.0, 10 + CHAR * max(len(", ".join(labels)) for labels in merged.values()))
    return _svg(frame.left + frame.width + right, frame.bottom + 48, title, parts)


def pareto_svg(points: Sequence[CostPoint], *, title: str = "APR against cost") -> str | None:
    """APR against estimated cost of runs, the Pareto front (:func:`pareto_front`) drawn as a line
    through its points (class ``front``; the others are ``point``); None without points.

    Both axes start at zero; runs at the same point share one dot and one label.
    """
    if not points:
        return None
    front = {(p.cost, p.apr) for p in pareto_front(points)}
    merged: dict[tuple[float, float], list[str]] = {}
    for p in points:
        merged.setdefault((p.cost, p.apr), []).append(p.label)
    top = max(p.cost for p in points)
    x_max = top * 1.3 if top > 0 else 1.0
    frame = Frame(left=60, top=36, width=400, height=260, x_max=x_max, y_max=105)
    x_ticks = [t for t in nice_ticks(x_max) if t <= x_max]
    parts = _axes(frame, x_ticks=x_ticks, y_ticks=range(0, 101, 20), xlabel="estimated cost of the run (USD)",
                  ylabel="APR (%)", title=title)
    line = " ".join(f"{_n(frame.x(cost))},{_n(frame.y(100 * apr))}" for cost, apr in sorted(front))
    parts.append(f'<polyline class="front-line" points="{line}" fill="none" stroke="{FRONT}" stroke-width="1.5" '
                 'stroke-dasharray="4 3"/>')
    for (cost, apr), labels in merged.items():
        on_front = (cost, apr) in front
        cx, cy = frame.x(cost), frame.y(100 * apr)
        parts.append(f'<circle class="{"front" if on_front else "point"}" cx="{_n(cx)}" cy="{_n(cy)}" '
                     f'r="{5 if on_front else 4}" fill="{FRONT if on_front else BAR}" data-cost="{cost:g}" '
                     f'data-apr="{100 * apr:g}"><title>{esc(", ".join(labels))}</title></circle>')
        parts.append(_text(cx + 7, cy - 5, ", ".join(labels), anchor="start", size=FONT - 1, extra=' class="label"'))
    legend_y = frame.bottom + 52
    parts.append(f'<circle cx="{_n(frame.left)}" cy="{_n(legend_y - 4)}" r="5" fill="{FRONT}"/>')
    parts.append(_text(frame.left + 10, legend_y, "Pareto front: no other run is as cheap and as good",
                       anchor="start", size=FONT - 1, extra=' class="legend"'))
    right = max(16.0, 10 + CHAR * max(len(", ".join(labels)) for labels in merged.values()))
    return _svg(frame.left + frame.width + right, legend_y + 12, title, parts)
