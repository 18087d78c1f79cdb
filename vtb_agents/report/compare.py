"""Compare runs: one row per run (model, settings, APR, ARS, per-category APR, tool metrics, tokens and
estimated cost), and every pair of runs compared task by task (:mod:`vtb_agents.analysis.paired`), as
rich tables for the terminal, JSON (:meth:`Comparison.to_dict`) and an HTML page with the flipped tasks
linked to both runs' task pages, APR against cost with the Pareto front, and APR against tool use.

The rows come from ``run.json`` and ``summary.json``; the pairs from each run's ``results.jsonl``.
Runs that cover different task sets are compared as they are in the rows (each run's scores over its
own tasks), :meth:`Comparison.coverage` says which tasks differ, and the pairs are over the common
tasks only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rich import box
from rich.console import Group, RenderableType

from vtb_agents.analysis.cost import recorded_prices
from vtb_agents.analysis.paired import PairedComparison, RunResults, compare_pairs
from vtb_agents.analysis.pareto import CostPoint
from vtb_agents.report.markup import esc, num, page, pct, table
from vtb_agents.report.paired import UNPAIRED_NOTE, left_out, paired_html, paired_rich, tasks_rich
from vtb_agents.report.plots import pareto_svg, scatter_svg
from vtb_agents.report.terminal import Col, Fitted, Sheet
from vtb_agents.report.usage import usd
from vtb_agents.rundir.read import ReportError, RunMeta, complete_results, read_meta
from vtb_agents.rundir.records import RunUsage
from vtb_agents.config import RunConfig
from vtb_agents.tasks.normalize import CATEGORIES
from vtb_agents.terminal import safe, safe_text


def settings_text(settings: RunConfig) -> str:
    """The settings that change results, in a few words (ablations named only when on)."""
    episode = settings.episode
    parts = [f"strategy {settings.strategy_spec}", f"prompt {episode.prompt_level}", f"history {episode.history}",
             f"≤{episode.max_tool_rounds} rounds", f"critical {settings.critical_rule}",
             f"sandbox {settings.sandbox}"]
    parts += [name.replace("_", " ") for name, on in (("no_tools", settings.no_tools),
                                                       ("no_vision_tool", settings.no_vision_tool)) if on]
    return ", ".join(parts)


@dataclass(frozen=True)
class RunRow:
    """One run in a comparison: what was run and what it scored (rates 0..1, None where unknown)."""

    run: str
    path: str
    model: str
    judge: str
    settings: str
    tasks: int
    graded: int
    apr: float | None
    ars: float | None
    category_apr: dict[str, float | None]
    proactivity: float | None
    volume: float | None
    success_rate: float | None
    cost: float | None
    cost_per_pass: float | None
    tokens: int | None
    cache_share: float | None = None
    cache_saving: float | None = None
    looked_turns: int = 0
    share_looked: float | None = None
    pass_when_looked: float | None = None
    pass_when_not: float | None = None


def run_row(meta: RunMeta, label: str) -> RunRow:
    """The comparison row of one run."""
    s, settings = meta.summary, meta.run.config
    return RunRow(
        run=label, path=str(meta.path), model=s.model or settings.model, judge=s.judge.model or settings.judge,
        settings=settings_text(settings), tasks=s.tasks, graded=s.graded, apr=s.apr, ars=s.ars,
        category_apr={name: block.apr for name, block in s.by_category.items()},
        proactivity=s.tool_metrics.proactivity, volume=s.tool_metrics.volume,
        success_rate=s.tool_metrics.success_rate, cost=s.cost.total, cost_per_pass=s.cost.per_passed_task,
        tokens=reported_tokens(s.usage), cache_share=s.prompt_cache.share, cache_saving=s.prompt_cache.saving,
        looked_turns=s.region_iou.turns, share_looked=s.region_iou.share_iou_ge_0_5,
        pass_when_looked=s.region_iou.pass_rate_when_looked, pass_when_not=s.region_iou.pass_rate_when_not)


def reported_tokens(usage: RunUsage) -> int | None:
    """Total tokens of model and judge; None (unknown) when a call or a result reported no usage."""
    if usage.tasks_without_usage or usage.model.calls_without_usage or usage.judge.calls_without_usage:
        return None
    return usage.model.total_tokens + usage.judge.total_tokens


def _labels(paths: Sequence[Path]) -> list[str]:
    """Run labels: directory names, with the parent folder added where names repeat."""
    names = [p.resolve().name for p in paths]
    return [f"{p.resolve().parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(paths, names)]


@dataclass(frozen=True)
class Coverage:
    """How the task sets of compared runs differ: how many tasks every run has, and per run label the
    ids it has beyond those (tasks some other run lacks), sorted."""

    common: int
    extra: dict[str, list[str]]

    def text(self, shown: int = 10) -> str:
        """One warning sentence naming the differing ids (``shown`` per run at most)."""
        parts = []
        for label, ids in self.extra.items():
            more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
            parts.append(f"{label} has {len(ids)}: {', '.join(ids[:shown])}{more}" if ids else f"{label} has none")
        return (f"the runs cover different task sets: each run's scores are over its own tasks, not over the same "
                f"ones; {self.common} task(s) are in every run. Tasks not in every run: {'; '.join(parts)}")


@dataclass
class Comparison:
    """Rows of :func:`run_row`, the categories any run has (paper order first), and, when read from
    the run directories, the task ids of each run by label and every pair of runs compared."""

    rows: list[RunRow]
    task_ids: dict[str, set[str]] = field(default_factory=dict)
    paired: list[PairedComparison] = field(default_factory=list)

    def coverage(self) -> Coverage | None:
        """How the runs' task sets differ, or None when they are the same (or fewer than two runs)."""
        sets = list(self.task_ids.values())
        if len(sets) < 2 or all(ids == sets[0] for ids in sets):
            return None
        common = set.intersection(*sets)
        return Coverage(len(common), {label: sorted(ids - common) for label, ids in self.task_ids.items()})

    @property
    def categories(self) -> list[str]:
        """Categories with a result in any run: the paper's order, then others by name."""
        seen = {name for row in self.rows for name in row.category_apr}
        return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))

    def headers(self) -> list[str]:
        """Column names, in the order of :meth:`cells`."""
        return ["run", "model", "judge", "settings", "graded/n", "APR", "ARS",
                *(c.replace("_", " ") for c in self.categories), "proactivity", "volume", "success rate",
                "tokens", "cost (USD)", "cost per pass", "input from cache", "cache saved (USD)", "turns measured",
                "IoU ≥ 0.5", "pass when looked", "pass when not"]

    def cells(self, row: RunRow) -> list[str]:
        """A row's cells as plain text (rates as percentages, volume as calls per task)."""
        return [row.run, row.model, row.judge, row.settings, f"{row.graded}/{row.tasks}",
                pct(row.apr), pct(row.ars), *(pct(row.category_apr.get(c)) for c in self.categories),
                pct(row.proactivity), num(row.volume), pct(row.success_rate),
                "unknown" if row.tokens is None else f"{row.tokens:,}", usd(row.cost), usd(row.cost_per_pass),
                pct(row.cache_share), usd(row.cache_saving), str(row.looked_turns), pct(row.share_looked),
                pct(row.pass_when_looked), pct(row.pass_when_not)]

    def to_rich(self) -> Group:
        """The comparison for the terminal: scores and tool metrics, APR per category, tokens and cost
        (three tables, each fitted to the terminal: :mod:`vtb_agents.report.terminal`). Run, model,
        judge and settings share a cell."""
        run = Col("run", figure=False, min_width=16)
        scores = Sheet([run, *(Col(h) for h in ("graded\n/n", "APR", "ARS", "proac-\ntivity", "volume",
                                                   "success\nrate"))], title="Runs compared", box=box.SIMPLE_HEAD)
        by_category = Sheet([run, *(Col(name.replace("_", "\n")) for name in self.categories)],
                            title="APR per category", box=box.SIMPLE_HEAD)
        costs = Sheet([run, Col("tokens"), Col("cost\n(USD)"), Col("cost per\npass"), Col("input from\ncache"),
                       Col("cache\nsaved")],
                      title="Tokens and estimated cost", box=box.SIMPLE_HEAD)
        looked = Sheet([run, Col("turns\nmeasured"), Col("IoU\n≥ 0.5"), Col("pass when\nlooked"),
                        Col("pass when\nnot")], title="Where it looked (best crop IoU)", box=box.SIMPLE_HEAD)
        for row in self.rows:
            cells = self.cells(row)
            first = safe_text(cells[0], style="bold")
            first.append(safe(f"\n{cells[1]} · judge {cells[2]}\n{cells[3]}"), style="dim")
            scores.add_row(first, *cells[4:7], *cells[-12:-9])
            by_category.add_row(safe_text(cells[0]), *cells[7:-12])
            costs.add_row(safe_text(cells[0]), *cells[-9:-4])
            looked.add_row(safe_text(cells[0]), *cells[-4:])
        tables: list[RenderableType] = [Fitted(scores), Fitted(by_category), Fitted(costs), Fitted(looked)]
        if not self.paired:
            return Group(*tables)
        notes = [f"{pair.b} vs {pair.a}: {text}" for pair in self.paired for text in left_out(pair)]
        if notes:
            notes.append(f"Those are left out of the paired figures; {UNPAIRED_NOTE}.")
        return Group(*tables, paired_rich(self.paired), *(safe_text(n, style="dim") for n in notes),
                     *tasks_rich(self.paired))

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON (``vtb compare --json``): ``runs`` (the rows), ``coverage`` (None when
        every run has the same tasks) and ``paired`` (one object per pair, docs/tutorials/compare-runs.md)."""
        coverage = self.coverage()
        return {"runs": [asdict(row) for row in self.rows], "coverage": asdict(coverage) if coverage else None,
                "paired": [pair.model_dump(mode="json") for pair in self.paired]}

    def cost_points(self) -> tuple[list[CostPoint], list[str]]:
        """The runs with a known cost and APR as chart points, and the labels of those without."""
        points = [CostPoint(r.run, r.cost, r.apr) for r in self.rows if r.cost is not None and r.apr is not None]
        return points, [r.run for r in self.rows if r.cost is None or r.apr is None]

    def to_html(self, *, compact: bool = False) -> str:
        """The comparison as an HTML table; ``compact`` leaves out run, judge and settings (the single-run
        report shows those in its header) and the region figures (it has a table of its own)."""
        count = len(self.headers())
        skip = {0, 2, 3, count - 4, count - 3, count - 2, count - 1} if compact else set()
        keep = [i for i in range(len(self.headers())) if i not in skip]
        rows = ([esc(cells[i]) for i in keep] for cells in map(self.cells, self.rows))
        html = table([self.headers()[i] for i in keep], rows, cls="cmp compact" if compact else "cmp",
                     caption="Category columns hold APR; volume is tool calls per task.")
        return f'<div class="scroll">{html}</div>'


def compare_runs(run_dirs: Sequence[Path | str]) -> Comparison:
    """Read every run (``run.json``, ``summary.json``, ``results.jsonl``; a :class:`ReportError` names a
    bad one) and compare each pair of them task by task."""
    if not run_dirs:
        raise ReportError("no run directories to compare")
    paths = [Path(p) for p in run_dirs]
    labels = _labels(paths)
    metas = [read_meta(path) for path in paths]
    runs = [RunResults(label=label, results=complete_results(meta.path, ReportError), prices=recorded_prices(meta.run))
            for meta, label in zip(metas, labels)]
    return Comparison(rows=[run_row(meta, label) for meta, label in zip(metas, labels)],
                      task_ids={run.label: {r.task_id for r in run.results} for run in runs},
                      paired=compare_pairs(runs))


def write_comparison(run_dirs: Sequence[Path | str], out_html: Path | str) -> Path:
    """Compare ``run_dirs`` (:func:`compare_runs`) and write the page (:func:`write_comparison_page`)."""
    return write_comparison_page(compare_runs(run_dirs), out_html)


def write_comparison_page(comparison: Comparison, out_html: Path | str) -> Path:
    """Write the comparison page: the table, the paired comparison with the flips linked to both runs'
    task pages (:mod:`vtb_agents.report.paired`), APR against cost with the Pareto front, and APR
    against proactivity and volume."""
    out = Path(out_html)
    points = [(r.run, r.proactivity, r.apr) for r in comparison.rows]
    volume = [(r.run, r.volume, r.apr) for r in comparison.rows]
    plots = [scatter_svg(points, xlabel="proactivity (% of tasks with a tool call)", ylabel="APR (%)",
                         title="APR against proactivity", x_percent=True),
             scatter_svg(volume, xlabel="volume (tool calls per task)", ylabel="APR (%)",
                         title="APR against volume")]
    shown = "".join(f'<div class="plot">{svg}</div>' for svg in plots if svg) or \
        '<p class="note">No run has both APR and tool metrics to plot.</p>'
    cost_points, unpriced = comparison.cost_points()
    pareto = pareto_svg(cost_points)
    cost_note = (f'<p class="note">Not plotted (cost or APR unknown): {esc(", ".join(unpriced))}.</p>'
                 if unpriced else "")
    cost_plot = (f'<div class="plot pareto">{pareto}</div>' if pareto else "") + cost_note
    runs = "".join(f"<li><b>{esc(r.run)}</b>: {esc(r.path)}</li>" for r in comparison.rows)
    coverage = comparison.coverage()
    warning = f'<p class="note"><b>Warning:</b> {esc(coverage.text())}</p>' if coverage else ""
    run_dirs = {r.run: Path(r.path) for r in comparison.rows}
    body = (f"<h1>Run comparison</h1><p class=\"sub\">{len(comparison.rows)} run(s)</p>"
            f"<ul>{runs}</ul>{warning}{comparison.to_html()}"
            f"{paired_html(comparison.paired, run_dirs, out.parent)}"
            f"<h2>APR and cost</h2>{cost_plot}"
            f"<h2>APR and tool use</h2><div class=\"grid\">{shown}</div>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page("Run comparison", body), encoding="utf-8")
    return out
