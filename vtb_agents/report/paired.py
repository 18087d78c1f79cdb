"""The paired comparison of runs (:mod:`vtb_agents.analysis.paired`) shown: a table for the terminal,
and for ``compare.html`` a section per pair with its figures and the flipped tasks, each linked to
both runs' task pages.

Links: a task page is ``RUN/tasks/<stem>.html`` (:func:`~vtb_agents.rundir.layout.task_page_file`,
written with the run's report: ``vtb run``, ``evaluate()``, ``vtb report RUN``), one per epoch. The
link is relative to the folder of ``compare.html`` when the run directory and that folder share a
parent below the file-system root (a folder of runs with the page beside them moves as one), else an
absolute ``file://`` URL. A page that does not exist when
``compare.html`` is written is not linked (the list says so) rather than linked broken.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from rich import box
from rich.console import Group
from rich.text import Text

from vtb_agents.analysis.paired import PairedComparison
from vtb_agents.report.markup import esc, table
from vtb_agents.report.terminal import Col, Fitted, Sheet
from vtb_agents.report.usage import usd
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.terminal import safe, safe_text

UNPAIRED_NOTE = ("ungraded tasks (infrastructure failures, critical rubrics nobody could judge) cannot be paired: "
                 "they are listed, never counted as a pass or a fail")


def signed_pct(value: float | None) -> str:
    """A 0..1 difference in percentage points with its sign, ``-`` when absent."""
    return "-" if value is None else f"{100 * value:+.1f}"


def interval(ci: tuple[float, float] | None) -> str:
    """A 0..1 interval in percentage points, ``-`` when absent."""
    return "-" if ci is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def p_value(p: float | None) -> str:
    """A p-value with three significant digits, ``-`` when absent."""
    return "-" if p is None else f"{p:.3g}"


def signed_usd(value: float | None) -> str:
    """A cost difference in USD with its sign, ``unknown`` when absent."""
    return "unknown" if value is None else ("+" if value >= 0 else "-") + usd(abs(value))


def cells(pair: PairedComparison) -> list[str]:
    """One pair as plain-text cells, in the order of :data:`HEADERS`."""
    return [f"{pair.b} vs {pair.a}", str(pair.tasks), str(len(pair.flips_to_pass)), str(len(pair.flips_to_fail)),
            p_value(pair.mcnemar_p), signed_pct(pair.delta_apr), interval(pair.delta_apr_ci),
            signed_pct(pair.delta_ars), interval(pair.delta_ars_ci), signed_usd(pair.delta_cost),
            str(pair.looked_turns), signed_pct(pair.delta_share_looked), interval(pair.delta_share_looked_ci)]


HEADERS = ["B vs A", "paired tasks", "flips to pass", "flips to fail", "McNemar p", "ΔAPR (pts)", "95% CI",
           "ΔARS (pts)", "95% CI", "Δcost (USD)", "turns measured in both", "Δ share looked (pts)", "95% CI"]
SHOWN = 20
"""Task ids listed in the terminal per kind of change (flips, pass counts), then a count of the rest."""


def left_out(pair: PairedComparison) -> list[str]:
    """Sentences naming the tasks of the pair that are not paired (none when every task is)."""
    parts = [(f"only in {pair.a}", pair.only_in_a), (f"only in {pair.b}", pair.only_in_b),
             (f"ungraded in {pair.a}", pair.ungraded_a), (f"ungraded in {pair.b}", pair.ungraded_b)]
    return [f"{len(ids)} task(s) {what}: {', '.join(ids[:10])}{' …' if len(ids) > 10 else ''}"
            for what, ids in parts if ids]


def paired_rich(pairs: Sequence[PairedComparison]) -> Group:
    """The pairs for the terminal (fitted to its width): B, A and the paired tasks in the first cell,
    flips, McNemar p, differences in percentage points with their intervals below them, cost difference;
    then the difference in the share of turns that looked at the right place."""
    out = Sheet([Col(HEADERS[0], figure=False, min_width=10),
                 *(Col(h) for h in ("flips\n+ / −", "McNemar\np", "ΔAPR (pts)\n95% CI", "ΔARS (pts)\n95% CI",
                                     "Δcost\n(USD)"))],
                title="Paired comparison: B minus A over the tasks graded in both\n(flips + to pass, − to fail)",
                box=box.SIMPLE_HEAD)
    for pair in pairs:
        c = cells(pair)
        label = safe_text(pair.b, style="bold")
        label.append(safe(f"\nvs {pair.a}\n{pair.tasks} paired task(s)"), style="dim")
        out.add_row(label, f"{c[2]} / {c[3]}", c[4], f"{c[5]}\n{c[6]}", f"{c[7]}\n{c[8]}", c[9])
    looked = Sheet([Col(HEADERS[0], figure=False, min_width=10), Col("turns measured\nin both"),
                    Col("Δ share looked (pts)\n95% CI")],
                   title="Paired: where it looked (share of turns with best crop IoU ≥ 0.5, B minus A)",
                   box=box.SIMPLE_HEAD)
    for pair in pairs:
        c = cells(pair)
        looked.add_row(safe_text(f"{pair.b} vs {pair.a}"), c[10], f"{c[11]}\n{c[12]}")
    return Group(Fitted(out), Fitted(looked))


def id_list(ids: Sequence[str], shown: int = SHOWN) -> str:
    """The first ``shown`` of ``ids``, then how many more."""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more if ids else "none"


def tasks_rich(pairs: Sequence[PairedComparison]) -> list[Text]:
    """Per pair, the tasks that moved: the flips each way and, with epochs, the tasks whose number of
    passing epochs changed (the first :data:`SHOWN` of each, then a count)."""
    lines: list[Text] = []
    for pair in pairs:
        lines.append(safe_text(f"{pair.b} vs {pair.a}: tasks that moved", style="bold"))
        lines.append(Text(f"  flips to pass ({len(pair.flips_to_pass)}): {id_list(pair.flips_to_pass)}"))
        lines.append(Text(f"  flips to fail ({len(pair.flips_to_fail)}): {id_list(pair.flips_to_fail)}"))
        if pair.pass_counts_changed:
            changes = [f"{c.task_id} {c.passes_a}/{c.epochs_a}→{c.passes_b}/{c.epochs_b}"
                       for c in pair.pass_counts_changed]
            lines.append(Text(f"  passing epochs changed ({len(changes)}): {id_list(changes)}"))
    return lines


def page_href(page: Path, out_dir: Path) -> str:
    """``page`` as a link from a page in ``out_dir``: relative below a shared parent, else ``file://``."""
    page, out_dir = page.resolve(), out_dir.resolve()
    if Path(os.path.commonpath([page, out_dir])) == Path(page.anchor):
        return page.as_uri()
    return quote(os.path.relpath(page, out_dir))


def task_pages(run_dir: Path, task_id: str) -> list[tuple[int, Path]]:
    """The task's pages that exist in ``run_dir``, by epoch (1, 2, ... up to the first missing one)."""
    found: list[tuple[int, Path]] = []
    while (page := task_page_file(run_dir, task_id, len(found) + 1)).is_file():
        found.append((len(found) + 1, page))
    return found


def _run_links(label: str, pages: list[tuple[int, Path]], out_dir: Path, side: str) -> str:
    if not pages:
        return f'<span class="note no-page">{esc(label)}: no task page</span>'
    return " ".join(
        f'<a class="page-{side}" href="{esc(page_href(page, out_dir))}">{esc(label)}'
        f'{"" if len(pages) == 1 else f" epoch {epoch}"}</a>' for epoch, page in pages)


def _flip_list(pair: PairedComparison, ids: list[str], kind: str, dirs: tuple[Path, Path], out_dir: Path,
               unlinked: set[str], notes: dict[str, str] | None = None) -> str:
    """The tasks ``ids`` (flips, or changed pass counts with ``notes`` by id) as a list linked to both
    runs' pages; runs lacking a page are added to ``unlinked``."""
    if not ids:
        return '<p class="note">none</p>'
    items = []
    for task_id in ids:
        links = []
        for side, label, run_dir in (("a", pair.a, dirs[0]), ("b", pair.b, dirs[1])):
            pages = task_pages(run_dir, task_id)
            unlinked.update([label] if not pages else [])
            links.append(_run_links(label, pages, out_dir, side))
        note = f" ({esc(notes[task_id])})" if notes and task_id in notes else ""
        items.append(f'<li class="flip {kind}" data-task="{esc(task_id)}"><code>{esc(task_id)}</code>{note} · '
                     f"{' · '.join(links)}</li>")
    return f'<ul class="flips {kind}">{"".join(items)}</ul>'


def paired_html(pairs: Sequence[PairedComparison], run_dirs: dict[str, Path], out_dir: Path) -> str:
    """The ``compare.html`` section of the pairs: a table of the figures, then per pair the tasks left
    out and the flips, each linked to both runs' task pages (``run_dirs`` by run label)."""
    if not pairs:
        return ""
    rows = ([esc(c) for c in cells(pair)] for pair in pairs)
    parts = [f'<h2>Paired comparison</h2><div class="scroll">{table(HEADERS, rows, cls="paired")}</div>',
             '<p class="note">B minus A over the tasks graded in both runs; McNemar exact two-sided on the flips '
             "(majority over epochs); 95% percentile intervals of a paired bootstrap over tasks "
             f"({pairs[0].bootstrap_resamples:,} resamples, seed {pairs[0].bootstrap_seed}); cost of the paired "
             f"tasks. Tasks in one run only are left out; {esc(UNPAIRED_NOTE)}.</p>"]
    unlinked: set[str] = set()
    for pair in pairs:
        dirs = (run_dirs[pair.a], run_dirs[pair.b])
        notes = "".join(f"<li>{esc(text)}</li>" for text in left_out(pair))
        flips = [_flip_list(pair, pair.flips_to_pass, "to-pass", dirs, out_dir, unlinked),
                 _flip_list(pair, pair.flips_to_fail, "to-fail", dirs, out_dir, unlinked)]
        changed = ""
        if pair.pass_counts_changed:
            counts = {c.task_id: f"{c.passes_a}/{c.epochs_a} → {c.passes_b}/{c.epochs_b}"
                      for c in pair.pass_counts_changed}
            changed = (f"<h4>Passing epochs changed ({len(counts)})</h4>"
                       + _flip_list(pair, list(counts), "count-changed", dirs, out_dir, unlinked, counts))
        parts.append(f'<section class="pair"><h3>{esc(pair.b)} vs {esc(pair.a)}</h3>'
                     + (f'<ul class="left-out">{notes}</ul>' if notes else "")
                     + f"<h4>Flips to pass ({len(pair.flips_to_pass)}): failed in {esc(pair.a)}, passed in "
                     f"{esc(pair.b)}</h4>{flips[0]}"
                     + f"<h4>Flips to fail ({len(pair.flips_to_fail)}): passed in {esc(pair.a)}, failed in "
                     f"{esc(pair.b)}</h4>{flips[1]}{changed}</section>")
    if unlinked:
        parts.append(f'<p class="note">No task pages linked for {esc(", ".join(sorted(unlinked)))}: '
                     "<code>vtb report RUN</code> writes them (RUN/tasks/).</p>")
    return "".join(parts)
