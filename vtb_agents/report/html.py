"""The run report: ``RUN_DIR/report.html``, an offline page (inline CSS, SVG plots and script, no
network), one page per task under ``RUN_DIR/tasks/`` and the images under ``RUN_DIR/report_files/``.

``report.html`` opens on the task table (:mod:`vtb_agents.report.task_table`: filters, search, a
link to each task's page), then the run (what was run, resolved model settings, sandbox isolation,
counts, why tasks are ungraded), scores in the paper's style with breakdowns and plots, tool-use
metrics, judge counts, tokens and estimated cost. Task details live on the task pages
(:mod:`vtb_agents.report.task_page`), loaded only when opened.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.analysis.cost import recorded_prices, task_cost
from vtb_agents.report.compare import Comparison, run_row, settings_text
from vtb_agents.report.images import ReportImages
from vtb_agents.report.markup import esc, interval, num, page, pct, table
from vtb_agents.report.plots import apr_by_category_svg, image_ops_svg
from vtb_agents.report.regions_html import region_table
from vtb_agents.report.task_page import TaskPage, write_task_pages
from vtb_agents.report.task_table import task_table, write_search_index
from vtb_agents.report.usage import settings_rows, usage_section
from vtb_agents.rundir.lock import RunDirBusy, run_dir_lock
from vtb_agents.rundir.read import ReportError, RunData, load_run
from vtb_agents.rundir.records import GroupScore, RunSummary, Uncertainty
from vtb_agents.tasks.model import Task

REPORT_FILE = "report.html"
ISOLATION = {"bwrap": "bubblewrap namespaces: host out of reach", "fallback": "namespaces via unshare; "
             "host files readable", "process": "plain process, no namespaces: debugging only",
             "e2b": "remote E2B sandbox"}
"""What each sandbox isolation level means (``vtb_agents/sandbox/isolation.py`` has the details)."""
SECTIONS = (("tasks", "Tasks"), ("run", "Run"), ("scores", "Scores"), ("tool-use", "Tool use"), ("judge", "Judge"),
            ("cost", "Tokens and cost"))
"""The page's sections, in order (element id, title), linked from the top of the page."""


def _kv(rows: list[tuple[str, Any]], caption: str = "") -> str:
    return table([], ([esc(k), esc(v)] for k, v in rows), cls="kv", caption=caption)


def _reason_group(reason: str | None) -> str:
    """An ungraded reason without its specifics (``3 rubric(s) could not be judged: ...`` → its kind)."""
    return re.sub(r"^\d+ ", "", (reason or "no reason recorded").split(":")[0])


def _setting_counts(data: RunData, key: str) -> Counter[str]:
    """How many episodes recorded each value of the episode setting ``key``."""
    values = (getattr(r.episode.settings, key) for r in data.results if r.episode.settings is not None)
    return Counter(str(value) for value in values if value is not None)


def title(data: RunData) -> str:
    """Title, headline numbers, links to the sections, and whether the run is incomplete."""
    s, settings = data.summary, data.run.config
    model = s.model or settings.model
    kpis = [("APR", pct(s.apr)), ("ARS", pct(s.ars)), ("tasks", s.tasks), ("graded", s.graded),
            ("ungraded", s.ungraded), ("tool calls", s.tool_metrics.calls)]
    parts = [f"<h1>VisualToolBench report: {esc(model)}</h1>",
             f'<p class="sub">{esc(data.path.resolve())} · judge {esc(settings.judge)} · '
             f'started {esc(data.run.started_at or "?")} · vtb-agents {esc(data.run.vtb_agents or "?")}</p>',
             '<div class="kpis">' + "".join(f"<div class=\"kpi\"><b>{esc(v)}</b><span>{esc(k)}</span></div>"
                                            for k, v in kpis) + "</div>",
             '<nav class="sections">' + "".join(f'<a href="#{key}">{esc(name)}</a>' for key, name in SECTIONS)
             + "</nav>"]
    failed = s.infrastructure_errors
    if failed.count:
        ids = failed.task_ids
        parts.append(f'<div class="incomplete-box">INCOMPLETE: {esc(failed.count)} task(s) ungraded by '
                     f'infrastructure failures ({esc(", ".join(ids[:20]))}{" ..." if len(ids) > 20 else ""}); '
                     "APR and ARS cover the graded tasks only. Retry them with "
                     "<code>vtb run --resume --retry-errors</code>.</div>")
    if data.tasks_note:
        parts.append(f'<div class="warn-box">{esc(data.tasks_note)}</div>')
    return "".join(parts)


def run_section(data: RunData) -> str:
    """Run settings and counts, and why tasks are ungraded."""
    s, settings = data.summary, data.run.config
    isolation = _setting_counts(data, "sandbox_isolation")
    tools = next((r.episode.settings.tools for r in data.results if r.episode.settings is not None), None)
    model = s.model or settings.model
    parts = []
    episodes = s.episodes
    rows = [("model", model), ("strategy", settings.strategy_spec), ("judge", settings.judge),
            *settings_rows(data.run),
            ("task source", settings.tasks),
            ("sandbox", settings.sandbox),
            ("sandbox isolation", "; ".join(f"{k} ({n} episodes){': ' + ISOLATION[k] if k in ISOLATION else ''}"
                                            for k, n in isolation.most_common()) or "-"),
            *((label, "; ".join(f"{k} ({n} episodes)" for k, n in _setting_counts(data, key).most_common()) or "-")
              for label, key in (("sandbox memory cap", "sandbox_memory_cap"),
                                 ("sandbox syscall filter", "sandbox_syscall_filter"))),
            ("tools", ", ".join(tools) if tools else "-"), ("settings", settings_text(settings)),
            ("max image side", settings.episode.max_image_side),
            ("code timeout (s)", settings.episode.code_timeout_s), ("tags", ", ".join(settings.episode.tags) or "-")]
    counts = [("tasks", s.tasks), ("graded", s.graded), ("ungraded", s.ungraded),
              ("episode errors", episodes.errors), ("turns stopped at the tool-round cap", episodes.tool_round_cap),
              ("tasks stopped by the model's context window (graded)", episodes.context_exceeded),
              ("outcomes", ", ".join(f"{k} {n}" for k, n in s.outcomes.items()) or "-"),
              ("critical weight/flag disagreements", s.critical_disagreements)]
    parts.append(f'<h2 id="run">Run</h2><div class="grid">{_kv(rows, "Settings")}{_kv(counts, "Counts")}')
    reasons = Counter(_reason_group(r.grade.reason) for r in data.results if not r.grade.graded)
    if reasons:
        parts.append(table(["why ungraded", "tasks"], ([esc(k), esc(n)] for k, n in reasons.most_common()),
                           caption="Ungraded tasks (left out of APR and ARS)"))
    parts.append("</div>")
    return "".join(parts)


def score_table(title: str, blocks: dict[str, GroupScore], epochs: int) -> str:
    """A table of groups' APR and ARS with their 95% intervals (and pass@k, pass^k with epochs)."""
    passes = ["pass@k", "pass^k"] if epochs > 1 else []
    rows = ([esc(name), esc(b.n), esc(b.graded), pct(b.apr), interval(b.apr_ci95), pct(b.ars), interval(b.ars_ci95),
             *([pct(b.pass_at_k), pct(b.pass_hat_k)] if passes else [])] for name, b in blocks.items())
    return table([title, "n", "graded", "APR", "APR 95% CI", "ARS", "ARS 95% CI", *passes], rows)


def overall_score(summary: RunSummary) -> dict[str, GroupScore]:
    """The run's own APR and ARS with their intervals, as the one row ``overall`` of :func:`score_table`."""
    return {"overall": GroupScore(n=summary.tasks, graded=summary.graded, apr=summary.apr, ars=summary.ars,
                                  **summary.model_dump(include=set(Uncertainty.model_fields)))}


def scores(data: RunData) -> str:
    """The paper-style row, APR/ARS breakdowns and the APR-by-category plot."""
    s = data.summary
    overall = overall_score(s)
    paper = Comparison([run_row(data, data.path.resolve().name)]).to_html(compact=True)
    plot = apr_by_category_svg(s)
    return ('<h2 id="scores">Scores</h2>' + paper + '<div class="grid">'
            + score_table("", overall, s.epochs) + score_table("category", s.by_category, s.epochs)
            + score_table("domain", s.by_domain, s.epochs) + score_table("turn case", s.by_turncase, s.epochs)
            + "</div>" + (f'<div class="plot">{plot}</div>' if plot else "")
            + f'<h3 id="regions">Where it looked</h3>{region_table(s.region_iou)}')


def tool_use(summary: RunSummary) -> str:
    """Proactivity, success rate, volume, calls per tool, image operations (table and plot)."""
    tm = summary.tool_metrics
    metrics = [("proactivity (tasks with a tool call)", pct(tm.proactivity)),
               ("success rate (calls without error)", pct(tm.success_rate)),
               ("volume (calls per task)", num(tm.volume)), ("tool calls", tm.calls)]
    calls = tm.calls
    per_tool = table(["tool", "calls", "share"], ([esc(k), esc(n), pct(n / calls if calls else None)]
                                                  for k, n in tm.by_tool.items()),
                     caption="Calls per tool")
    ops = table(["image operation", "occurrences"],
                ([esc(k), esc(v)] for k, v in tm.image_ops.items()), caption="Image operations")
    plot = image_ops_svg(summary)
    return (f'<h2 id="tool-use">Tool use</h2><div class="grid">{_kv(metrics, "Tool metrics")}{per_tool}{ops}</div>'
            + (f'<div class="plot">{plot}</div>' if plot else '<p class="note">No image operations recorded.</p>'))


def judge_section(summary: RunSummary) -> str:
    """How the rubrics were decided, and what the caches answered: verdicts taken from the verdict cache
    (``judge.cache_hits``), and model and judge calls answered by the model cache (``usage``)."""
    j, usage = summary.judge, summary.usage
    rows = [("judge", j.model), ("LLM judge verdicts (a judge model asked)", j.calls),
            ("deterministic checks", j.checks), ("unjudged rubrics", j.unjudged), ("judge errors", j.errors),
            ("verdict cache hits (verdicts reused, no judge call)", j.cache_hits),
            *([("verdicts pending in a batch (vtb run --judge-batch)", j.pending)] if j.pending else [])]
    caches = [("model calls", usage.model.calls), ("of them answered by the model cache", usage.model_from_cache.calls),
              ("judge calls", usage.judge.calls), ("of them answered by the model cache", usage.judge_from_cache.calls),
              ("model cache hits in all (model and judge)", usage.cache_hits)]
    return (f'<h2 id="judge">Judge</h2><div class="grid">{_kv(rows, "Verdicts")}'
            f'{_kv(caches, "Calls and the model cache (--model-cache)")}</div>')


def task_pages(data: RunData) -> list[TaskPage]:
    """The page of every result (task and epoch) of the run with its cost at the prices the run recorded,
    by task id and epoch (the table's first order)."""
    prices = recorded_prices(data.run)
    return [TaskPage(r, data.tasks.get(r.task_id), task_cost(r, prices), epoch=r.epoch)
            for r in sorted(data.results, key=lambda r: (r.task_id, r.epoch))]


def write_report(run_dir: Path | str, *, tasks: Sequence[Task] | str | Path | None = None) -> Path:
    """Write ``RUN_DIR/report.html``, a page per task in ``RUN_DIR/tasks/`` and the images and text
    search index in ``RUN_DIR/report_files/``; return the report's path.

    ``tasks`` (tasks or a task source) defaults to the source recorded in ``run.json``. Raises
    ``ReportError`` for a missing or unfinished run directory, or one another process is writing
    (the run directory's lock).
    """
    if not Path(run_dir).is_dir():
        raise ReportError(f"{run_dir}: no such run directory")
    try:
        with run_dir_lock(Path(run_dir), "vtb report"):
            return _write_report(load_run(run_dir, tasks))
    except RunDirBusy as exc:
        raise ReportError(str(exc)) from None


def _write_report(data: RunData) -> Path:
    pages = task_pages(data)
    write_task_pages(data.path, pages, ReportImages(data.path))
    write_search_index(data.path, pages)
    body = (title(data) + task_table(pages, epochs=data.summary.epochs > 1) + run_section(data) + scores(data)
            + tool_use(data.summary) + judge_section(data.summary) + usage_section(data.summary))
    out = data.path / REPORT_FILE
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page(f"VTB report: {data.summary.model or data.run.config.model}", body, script="table.js"),
                   encoding="utf-8")
    tmp.replace(out)
    return out
