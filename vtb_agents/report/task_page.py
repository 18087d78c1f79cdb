"""One offline page per task, ``RUN_DIR/tasks/<stem>.html`` (:func:`~vtb_agents.rundir.layout.task_page_file`),
linked from the task table of ``report.html`` and opened only when clicked, so that the report of a
large run stays small.

A page holds what was run and how it ended (result, outcome, score, tool calls, cost), the episode's error and
why it is ungraded where so, then the transcript (:func:`~vtb_agents.report.transcript_html.
transcript_section`): the task's transcript record when the run has one (every model call, tool call, strategy
step and verdict), else the result's tool calls and verdicts. Its images are the report's files under
``RUN_DIR/report_files/`` (``../`` from the page); a click on a thumbnail shows the full-size image over the
page (inline script, no network). Every value from the task, the model, the tools or the judge is escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath

from vtb_agents.report.images import ReportImages
from vtb_agents.report.markup import badge, esc, num, page, pre
from vtb_agents.report.transcript_html import transcript_section
from vtb_agents.report.usage import usd
from vtb_agents.results import TaskResult
from vtb_agents.rundir.layout import TASK_PAGES_DIR, task_page_file
from vtb_agents.rundir.transcripts import find_transcript
from vtb_agents.tasks.model import Task

REPORT_LINK = "../report.html"
"""The way back from a task page to the run's report."""


def result_label(result: TaskResult) -> tuple[str, str]:
    """(label, CSS class) of a task's result: pass, fail or ungraded."""
    if not result.grade.graded:
        return "ungraded", "ungraded"
    return ("pass", "pass") if result.grade.passed else ("fail", "fail")


@dataclass(frozen=True)
class TaskPage:
    """One task's page: the result it shows, its task (None when not in the task source), its epoch
    and its cost in USD (None when unknown)."""

    result: TaskResult
    task: Task | None
    cost: float | None
    epoch: int = 1

    @cached_property
    def href(self) -> str:
        """The page relative to the run directory, as ``report.html`` links it (``tasks/<stem>.html``)."""
        return task_page_file(Path(), self.result.task_id, self.epoch).as_posix()

    @property
    def stem(self) -> str:
        """The page's file name without ``.html`` (unique per task and epoch)."""
        return PurePosixPath(self.href).stem

    def file(self, run_dir: Path) -> Path:
        """Where the page is written."""
        return Path(run_dir) / self.href

    def html(self, images: ReportImages) -> str:
        """The complete page (with the task's transcript when ``images.run_dir`` has one, read here:
        transcripts are loaded one page at a time, never all at once)."""
        result, task = self.result, self.task
        label, kind = result_label(result)
        grade, episode = result.grade, result.episode
        calls = episode.tool_calls
        failed = sum(not call.ok for call in calls)
        epoch = f" · epoch {self.epoch}" if self.epoch != 1 else ""
        failures = f' <span class="badge err">{failed} failed</span>' if failed else ""
        facts = [("result", badge(label, kind)), ("outcome", esc(result.ended.replace("_", " "))),
                 ("score", esc(num(grade.score))), ("turns", esc(len(episode.turns))),
                 ("tool calls", esc(len(calls)) + failures),
                 ("time", esc(f"{result.duration_s:.1f} s")), ("cost", esc(usd(self.cost)))]
        parts = [f'<p class="back"><a href="{REPORT_LINK}">← report</a></p>',
                 f'<h1>Task <span class="tid">{esc(result.task_id)}</span></h1>',
                 f'<p class="sub">{esc(result.category)} · {esc(result.domain)} · {esc(result.turncase)} · '
                 f'model {esc(result.model)} · strategy {esc(result.strategy)}{esc(epoch)}</p>',
                 '<div class="kpis">' + "".join(f'<div class="kpi"><b>{value}</b><span>{esc(name)}</span></div>'
                                                for name, value in facts) + "</div>"]
        if episode.error:
            trace = episode.traceback or ""
            parts.append(f'<div class="error-box">episode error: {esc(episode.error)}</div>'
                         + (pre(trace) if trace else ""))
        if not grade.graded:
            parts.append(f'<div class="warn-box">ungraded: {esc(grade.reason or "no reason recorded")}</div>')
        if task is None:
            parts.append('<p class="note">The task is not in the task source: prompts, golden answers and the '
                         "task's own images are not shown.</p>")
        transcript = find_transcript(images.run_dir, result.task_id, self.epoch)
        if transcript is not None:
            parts.append(f'<p class="cache-counts">{esc(transcript.cache_counts().text())}</p>')
        parts.append(transcript_section(result, task, images, transcript=transcript))
        return page(f"{result.task_id}: {label}", "".join(parts), script="task.js")

    def write(self, run_dir: Path, images: ReportImages) -> Path:
        """Write the page and return its path (a page is derived data: every report rewrites it)."""
        out = self.file(run_dir)
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(self.html(images))
        return out


def write_task_pages(run_dir: Path, pages: list[TaskPage], images: ReportImages) -> None:
    """Write every page of ``pages`` into ``RUN_DIR/tasks/`` and remove pages left there by an earlier
    report that no longer has them (that folder holds task pages only)."""
    folder = Path(run_dir) / TASK_PAGES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = {task_page.write(run_dir, images).name for task_page in pages}
    for stale in folder.glob("*.html"):
        if stale.name not in written:
            stale.unlink()
