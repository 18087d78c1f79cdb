"""One collapsible section per task: prompts, images, tool calls, answers and rubric verdicts.

Task text, model output, tool output and judge justifications are untrusted and always escaped.
Images appear as thumbnails linking to full-size files (see :mod:`vtb_agents.report.images`).
"""

from __future__ import annotations

import json
from collections import defaultdict

from vtb_agents.report.images import ImageLink, ReportImages
from vtb_agents.report.markup import badge, esc, num, pre, table
from vtb_agents.results import RubricVerdict, TaskResult, ToolCallRecord, TurnRecord
from vtb_agents.tasks.model import Rubric, Task, TaskImage

OUTPUT_LIMIT = 8_000
CODE_LIMIT = 20_000


def anchor(task_id: str) -> str:
    """The element id of a task's section (escaped for use in attributes)."""
    return esc(f"task-{task_id}")


def outcome(result: TaskResult) -> tuple[str, str]:
    """(label, CSS class) of a task's result: pass, fail or ungraded."""
    if not result.grade.graded:
        return "ungraded", "ungraded"
    return ("pass", "pass") if result.grade.passed else ("fail", "fail")


def figures(links: list[ImageLink], *, lazy: bool) -> str:
    """Thumbnails, each linking to its full-size file; a placeholder says why an image is missing."""
    if not links:
        return ""
    loading = ' loading="lazy"' if lazy else ""
    items = []
    for link in links:
        if link.thumb is None or link.full is None:
            items.append(f'<figure><div class="missing">{esc(link.problem)}</div>'
                         f"<figcaption>{esc(link.name)}</figcaption></figure>")
            continue
        size = f" · {link.size[0]}×{link.size[1]}" if link.size else ""
        items.append(f'<figure><a href="{esc(link.full)}"><img src="{esc(link.thumb)}" alt="{esc(link.name)}"'
                     f"{loading}></a><figcaption>{esc(link.name)}{size}</figcaption></figure>")
    return f'<div class="thumbs">{"".join(items)}</div>'


def format_output(text: str) -> str:
    """A tool's text result for reading: the code tools' JSON shown as ``key: value`` blocks."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return text
    parts = []
    for key, value in data.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown = shown.rstrip()
        parts.append(f"{key}:\n{shown}" if "\n" in shown else f"{key}: {shown}")
    return "\n".join(parts)


def call_html(call: ToolCallRecord, images: ReportImages, *, lazy: bool) -> str:
    """One tool call: name, round, status, the code (or arguments), the output and output images."""
    status = badge("ok", "ok") if call.ok else badge("error", "err")
    took = f" · {call.duration_s:.2f} s" if call.duration_s is not None else ""
    code = call.args.get("code") if isinstance(call.args.get("code"), str) else None
    args = pre(code, limit=CODE_LIMIT) if code is not None else \
        pre(json.dumps(call.args, indent=2, ensure_ascii=False), limit=CODE_LIMIT)
    links = [images.from_ref(img.ref, img.name) for img in call.images]
    return (f'<div class="call"><div class="call-head"><code>{esc(call.name)}</code>'
            f'<span class="note">round {call.round + 1}{took}</span>{status}</div>{args}'
            f'{pre(format_output(call.output), limit=OUTPUT_LIMIT, cls="out")}{figures(links, lazy=lazy)}</div>')


def verdict_rows(verdicts: list[RubricVerdict], rubrics: dict[str, Rubric]) -> list[list[str]]:
    """Table rows of a turn's verdicts."""
    rows = []
    for v in verdicts:
        rubric = rubrics.get(v.rubric_id)
        critical = "yes" if v.critical else "no"
        if v.critical != v.critical_flag:
            critical += f' <span class="note">(dataset flag: {"yes" if v.critical_flag else "no"})</span>'
        judge = esc(v.judge) + (' <span class="note">(cached)</span>' if v.cached else "")
        rows.append([esc(v.rubric_id), esc(rubric.description) if rubric else '<span class="note">-</span>',
                     esc(v.weight), critical, badge(v.status.replace("_", " "), v.status), judge,
                     esc(v.justification)])
    return rows


def verdict_table(verdicts: list[RubricVerdict], rubrics: dict[str, Rubric]) -> str:
    """The verdicts of one turn, colour-coded by status."""
    return table(["rubric", "description", "weight", "critical", "status", "judge", "justification"],
                 verdict_rows(verdicts, rubrics), cls="wide", row_classes=[v.status for v in verdicts])


def turn_images(task: Task, index: int) -> list[tuple[TaskImage, str]]:
    """The task's own images shown with turn ``index`` (its prompt's images), with their file names."""
    spec = task.turns[index] if index < len(task.turns) else None
    return [(task.images[i], task.image_name(i)) for i in (spec.images if spec else []) if 0 <= i < len(task.images)]


def turn_html(index: int, task: Task | None, record: TurnRecord | None, verdicts: list[RubricVerdict],
              images: ReportImages, *, lazy: bool) -> str:
    """One turn: prompt and images, tool calls, answer against the golden answer, verdicts."""
    spec = task.turns[index] if task and index < len(task.turns) else None
    parts = [f"<h3>Turn {index + 1}"]
    if record is not None:
        parts.append(f" {badge(record.status.replace('_', ' '), record.status)}"
                     f' <span class="note">{record.tool_rounds} tool round(s), {len(record.tool_calls)} call(s)</span>')
    parts.append("</h3>")
    if spec is not None:
        parts.append(f'<h4>Prompt</h4><div class="text">{esc(spec.prompt)}</div>')
        links = [images.from_task(image, name) for image, name in turn_images(task, index)] if task else []
        parts.append(figures(links, lazy=lazy))
    if record is not None and record.tool_calls:
        parts.append("<h4>Tool calls</h4>" + "".join(call_html(c, images, lazy=lazy) for c in record.tool_calls))
    answer = esc(record.answer) if record is not None else '<span class="note">no answer recorded</span>'
    golden = esc(spec.golden_answer) if spec is not None else '<span class="note">task not available</span>'
    parts.append(f'<div class="two"><div><h4>Answer</h4><div class="text answer">{answer}</div></div>'
                 f'<div><h4>Golden answer</h4><div class="text golden">{golden}</div></div></div>')
    if verdicts:
        rubrics = {r.id: r for r in spec.rubrics} if spec is not None else {}
        parts.append("<h4>Rubrics</h4>" + verdict_table(verdicts, rubrics))
    return f'<div class="turn">{"".join(parts)}</div>'


def task_section(result: TaskResult, task: Task | None, images: ReportImages, *, expand: bool = False) -> str:
    """The ``<details>`` section of one task (open when ``expand``, e.g. for printing)."""
    label, kind = outcome(result)
    grade, episode = result.grade, result.episode
    score = f"score {num(grade.score)}" if grade.score is not None else "no score"
    summary = (f'<summary><span class="tid">{esc(result.task_id)}</span>'
               f'<span class="meta">{esc(result.category)} · {esc(result.domain)} · {esc(result.turncase)}</span>'
               f"{badge(episode.status, 'plain' if episode.status == 'completed' else 'error')}"
               f'<span class="meta">{score}</span>{badge(label, kind)}</summary>')
    body: list[str] = []
    if episode.error:
        trace = episode.traceback or ""
        body.append(f'<div class="warn-box">episode error: {esc(episode.error)}</div>' + (pre(trace) if trace else ""))
    if not grade.graded:
        body.append(f'<div class="warn-box">ungraded: {esc(grade.reason or "no reason recorded")}</div>')
    if task is None:
        body.append('<p class="note">The task is not in the task source: prompts, golden answers and the '
                    "task's own images are not shown.</p>")
    by_turn: dict[int, list[RubricVerdict]] = defaultdict(list)
    for verdict in grade.verdicts:
        by_turn[verdict.turn].append(verdict)
    records = {t.index: t for t in episode.turns}
    count = max([len(task.turns) if task else 0, *(i + 1 for i in records), *(i + 1 for i in by_turn)])
    body.extend(turn_html(i, task, records.get(i), by_turn.get(i, []), images, lazy=not expand) for i in range(count))
    return (f'<details class="task" id="{anchor(result.task_id)}"{" open" if expand else ""}>{summary}'
            f'<div class="task-body">{"".join(body)}</div></details>')
