"""Compare runs: one row per run (model, settings, APR, ARS, per-category APR, tool metrics, tokens and
estimated cost) as rich tables for the terminal and an HTML page with APR-against-tool-use scatter plots.

Only ``run.json``, ``summary.json`` and the task ids at the start of each ``results.jsonl`` line are
read, so comparing large runs is instant. Runs that cover different task sets are compared as they
are (each run's scores over its own tasks), and :meth:`Comparison.coverage` says which tasks differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from vtb_agents.report.markup import esc, num, page, pct, table
from vtb_agents.report.plots import scatter_svg
from vtb_agents.report.usage import usd
from vtb_agents.rundir.read import ReportError, RunMeta, read_meta
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.tasks.normalize import CATEGORIES


def strategy_of(config: dict[str, Any]) -> str:
    """The strategy a recorded run used: the user's agent for ``agent:`` models, else ``strategy``
    (runs recorded before strategies existed used ``react``)."""
    model = str(config.get("model", ""))
    return model if model.startswith("agent:") else str(config.get("strategy", "react"))


def settings_text(config: dict[str, Any]) -> str:
    """The settings that change results, in a few words (ablations named only when on)."""
    episode = config.get("episode") or {}
    parts = [f"strategy {strategy_of(config)}", f"prompt {episode.get('prompt_level', '?')}",
             f"history {episode.get('history', '?')}",
             f"≤{episode.get('max_tool_rounds', '?')} rounds", f"critical {config.get('critical_rule', '?')}",
             f"sandbox {config.get('sandbox', '?')}"]
    parts += [name.replace("_", " ") for name in ("no_tools", "no_vision_tool") if config.get(name)]
    return ", ".join(parts)


def run_row(meta: RunMeta, label: str) -> dict[str, Any]:
    """The comparison row of one run."""
    s, config = meta.summary, meta.config
    tools = s.get("tool_metrics") or {}
    return {
        "run": label, "path": str(meta.path), "model": s.get("model") or config.get("model", "?"),
        "judge": (s.get("judge") or {}).get("model") or config.get("judge", "?"), "settings": settings_text(config),
        "tasks": s.get("tasks"), "graded": s.get("graded"), "apr": s.get("apr"), "ars": s.get("ars"),
        "category_apr": {name: block.get("apr") for name, block in (s.get("by_category") or {}).items()},
        "proactivity": tools.get("proactivity"), "volume": tools.get("volume"),
        "success_rate": tools.get("success_rate"),
        "cost": (s.get("cost") or {}).get("total"), "cost_per_pass": (s.get("cost") or {}).get("per_passed_task"),
        "tokens": reported_tokens(s.get("usage")),
    }


def reported_tokens(usage: dict[str, Any] | None) -> int | None:
    """Total tokens of model and judge; None (unknown) when a call or a result reported no usage."""
    if not usage or usage.get("tasks_without_usage"):
        return None
    sides = [usage.get(side) or {} for side in ("model", "judge")]
    if any(side.get("calls_without_usage") for side in sides):
        return None
    return sum(side.get("total_tokens", 0) for side in sides)


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
    """Rows of :func:`run_row`, the categories any run has (paper order first), and the task ids of
    each run by label (when read from the run directories)."""

    rows: list[dict[str, Any]]
    task_ids: dict[str, set[str]] = field(default_factory=dict)

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
        seen = {name for row in self.rows for name in row["category_apr"]}
        return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))

    def headers(self) -> list[str]:
        """Column names, in the order of :meth:`cells`."""
        return ["run", "model", "judge", "settings", "graded/n", "APR", "ARS",
                *(c.replace("_", " ") for c in self.categories), "proactivity", "volume", "success rate",
                "tokens", "cost (USD)", "cost per pass"]

    def cells(self, row: dict[str, Any]) -> list[str]:
        """A row's cells as plain text (rates as percentages, volume as calls per task)."""
        return [row["run"], row["model"], row["judge"], row["settings"], f"{row['graded']}/{row['tasks']}",
                pct(row["apr"]), pct(row["ars"]), *(pct(row["category_apr"].get(c)) for c in self.categories),
                pct(row["proactivity"]), num(row["volume"]), pct(row["success_rate"]),
                "unknown" if row["tokens"] is None else f"{row['tokens']:,}", usd(row["cost"]),
                usd(row["cost_per_pass"])]

    def to_rich(self) -> Group:
        """The comparison for the terminal: scores and tool metrics, then APR per category (two
        tables, so that each fits an 80-column terminal). Run, model, judge and settings share a cell."""
        scores = Table(title="Runs compared", box=box.SIMPLE_HEAD)
        by_category = Table(title="APR per category", box=box.SIMPLE_HEAD)
        costs = Table(title="Tokens and estimated cost", box=box.SIMPLE_HEAD)
        for out in (scores, by_category, costs):
            out.add_column("run", ratio=1, min_width=16, overflow="fold")
        for header in ("graded\n/n", "APR", "ARS", "proac-\ntivity", "volume", "success\nrate"):
            scores.add_column(header, justify="right", no_wrap=True)
        for name in self.categories:
            by_category.add_column(name.replace("_", "\n"), justify="right", no_wrap=True)
        for header in ("tokens", "cost\n(USD)", "cost per\npass"):
            costs.add_column(header, justify="right", no_wrap=True)
        for row in self.rows:
            cells = self.cells(row)
            first = Text(cells[0], style="bold")
            first.append(f"\n{cells[1]} · judge {cells[2]}\n{cells[3]}", style="dim")
            scores.add_row(first, *cells[4:7], *cells[-6:-3])
            by_category.add_row(cells[0], *cells[7:-6])
            costs.add_row(cells[0], *cells[-3:])
        return Group(scores, by_category, costs)

    def to_html(self, *, compact: bool = False) -> str:
        """The comparison as an HTML table; ``compact`` leaves out run, judge and settings (the single-run
        report shows those in its header)."""
        skip = {0, 2, 3} if compact else set()
        keep = [i for i in range(len(self.headers())) if i not in skip]
        rows = ([esc(cells[i]) for i in keep] for cells in map(self.cells, self.rows))
        html = table([self.headers()[i] for i in keep], rows, cls="cmp compact" if compact else "cmp",
                     caption="Category columns hold APR; volume is tool calls per task.")
        return f'<div class="scroll">{html}</div>'


def compare_runs(run_dirs: Sequence[Path | str]) -> Comparison:
    """Read every run's ``run.json`` and ``summary.json`` (a :class:`ReportError` names a bad one)."""
    if not run_dirs:
        raise ReportError("no run directories to compare")
    paths = [Path(p) for p in run_dirs]
    labels = _labels(paths)
    rows = [run_row(read_meta(path), label) for path, label in zip(paths, labels)]
    return Comparison(rows, {label: ResultsStore(path).task_ids() for path, label in zip(paths, labels)})


def write_comparison(run_dirs: Sequence[Path | str], out_html: Path | str) -> Path:
    """Write the comparison page (table and scatter plots of APR against proactivity and volume)."""
    comparison = compare_runs(run_dirs)
    points = [(r["run"], r["proactivity"], r["apr"]) for r in comparison.rows]
    volume = [(r["run"], r["volume"], r["apr"]) for r in comparison.rows]
    plots = [scatter_svg(points, xlabel="proactivity (% of tasks with a tool call)", ylabel="APR (%)",
                         title="APR against proactivity", x_percent=True),
             scatter_svg(volume, xlabel="volume (tool calls per task)", ylabel="APR (%)",
                         title="APR against volume")]
    shown = "".join(f'<div class="plot">{svg}</div>' for svg in plots if svg) or \
        '<p class="note">No run has both APR and tool metrics to plot.</p>'
    runs = "".join(f"<li><b>{esc(r['run'])}</b>: {esc(r['path'])}</li>" for r in comparison.rows)
    coverage = comparison.coverage()
    warning = f'<p class="note"><b>Warning:</b> {esc(coverage.text())}</p>' if coverage else ""
    body = (f"<h1>Run comparison</h1><p class=\"sub\">{len(comparison.rows)} run(s)</p>"
            f"<ul>{runs}</ul>{warning}{comparison.to_html()}<h2>APR and tool use</h2><div class=\"grid\">{shown}</div>")
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page("Run comparison", body), encoding="utf-8")
    return out
