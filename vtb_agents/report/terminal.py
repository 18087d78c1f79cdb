"""Tables that fit the terminal: every figure printed whole at the console's width (80 columns and up).

Why: rich squeezes a table wider than the terminal by cutting its cells (``24.5–10…``), so an interval's
upper bound could not be read on an 80-column terminal. A :class:`Sheet` says which columns hold figures
(never wrapped, never cut) and which may be left out first; :class:`Fitted` picks, when it is printed
(so ``COLUMNS`` and the real terminal width count), the first of its layouts whose figures fit whole,
else the last layout without its lowest-priority columns, one at a time, with a caption naming those
left out. Text columns (group names, run labels) wrap at word boundaries or fold, as rich does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from rich import box as boxes
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "Fitted", "Sheet"]


@dataclass(frozen=True)
class Col:
    """A column: its header; ``figure`` (numbers, intervals: right-aligned, never wrapped or cut) or text
    (wrapped at words, long words folded; ``min_width`` at least); ``drop``: 0 always shown, else
    left out when the table does not fit, the highest ``drop`` first."""

    header: str
    figure: bool = True
    drop: int = 0
    min_width: int | None = None


@dataclass
class Sheet:
    """One layout of a table: title, caption, columns and rows (a cell per column; strings or rich
    renderables), and the indices of the rows that start a new section (a rule above them)."""

    columns: Sequence[Col]
    rows: list[Sequence[RenderableType]] = field(default_factory=list)
    title: str | None = None
    caption: str | None = None
    sections: set[int] = field(default_factory=set)
    box: boxes.Box = boxes.HEAVY_HEAD

    def add_row(self, *cells: RenderableType, section: bool = False) -> None:
        """Add a row (``section``: a rule above it)."""
        if section and self.rows:
            self.sections.add(len(self.rows))
        self.rows.append(cells)

    def table(self, left_out: Iterable[str] = ()) -> Table:
        """The rich table without the columns named in ``left_out`` (a caption says which)."""
        skip = set(left_out)
        keep = [i for i, col in enumerate(self.columns) if col.header not in skip]
        caption = self.caption or ""
        if skip:
            note = f"not shown to fit the terminal: {', '.join(sorted(skip))} (widen it or set COLUMNS)"
            caption = f"{caption}\n{note}" if caption else note
        out = Table(title=self.title, caption=caption or None, box=self.box)
        for i in keep:
            col = self.columns[i]
            if col.figure:
                out.add_column(col.header, justify="right", no_wrap=True)
            else:
                out.add_column(col.header, overflow="fold", min_width=col.min_width)
        for number, row in enumerate(self.rows):
            if number in self.sections:
                out.add_section()
            out.add_row(*(row[i] for i in keep))
        return out


def _needed(table: Table, console: Console, options: ConsoleOptions) -> int:
    """The width ``table`` needs with every figure column whole (its widest cell, header included) and
    every text column as wide as its longest word (or its ``min_width``), borders and padding included."""
    _top, right, _bottom, left = table.padding
    total = (2 if table.show_edge else 0) + len(table.columns) - 1 if table.box else 0
    for column in table.columns:
        sizes = [Measurement.get(console, options, cell) for cell in [column.header, *column.cells]]
        own = max(s.maximum for s in sizes) if column.no_wrap else max(s.minimum for s in sizes)
        total += max(own, column.min_width or 0) + left + right
    return total


def fit(layouts: Sequence[Sheet], console: Console, options: ConsoleOptions) -> Table:
    """The first layout whose figures fit ``options.max_width`` whole; else the last, leaving out its
    droppable columns (highest ``drop`` first) until it fits or none is left."""
    width = options.max_width
    for sheet in layouts:
        table = sheet.table()
        if _needed(table, console, options) <= width:
            return table
    last = layouts[-1]
    droppable = sorted((c for c in last.columns if c.drop), key=lambda c: -c.drop)
    left_out: list[str] = []
    for col in droppable:
        left_out.append(col.header)
        table = last.table(left_out)
        if _needed(table, console, options) <= width:
            return table
    return table


class Fitted:
    """A table chosen when printed, to fit the console (see the module): ``layouts`` in order of
    preference (e.g. intervals in columns of their own, then under their figures)."""

    def __init__(self, *layouts: Sheet) -> None:
        if not layouts:
            raise ValueError("Fitted needs at least one layout")
        self.layouts = layouts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield fit(self.layouts, console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, fit(self.layouts, console, options))


def dim(text: str) -> Text:
    """``text`` dimmed (section labels, notes)."""
    return Text(text, style="dim")
