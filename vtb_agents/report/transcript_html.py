"""The transcript section of a task page: what happened, turn by turn, beside how it was judged.

:func:`transcript_section` is the one seam a task page calls for it. Today it renders what the run's
``TaskResult`` holds: per turn the prompt and its images, every tool call (failed ones highlighted),
the answer beside the golden answer, and each rubric verdict right under the answer it judged. When
the per-task transcript record (``transcripts/<stem>.json``: model, tool, judge and strategy-step
events) exists, this function takes it and renders its events here; strategy steps go in a
``<div class="step">`` (styled apart in ``templates/report.css``), errors in ``.call.failed`` /
``.warn-box``. Nothing else of the report needs to change.

Task text, model output, tool output and judge justifications are untrusted and always escaped.
Images appear as thumbnails linking to full-size files (see :mod:`vtb_agents.report.images`); the
task page's script shows the full-size image over the page on a click.
"""

from __future__ import annotations

import json
from collections import defaultdict

from vtb_agents.report.images import ImageLink, ReportImages
from vtb_agents.report.markup import badge, esc, pre, table
from vtb_agents.results import RubricVerdict, TaskResult, ToolCallRecord, TurnRecord
from vtb_agents.tasks.model import Rubric, Task, TaskImage

OUTPUT_LIMIT = 8_000
CODE_LIMIT = 20_000


def figures(links: list[ImageLink], *, base: str) -> str:
    """Thumbnails, each linking to its full-size file (paths prefixed with ``base``, the way from the
    page to the run directory); a placeholder says why an image is missing."""
    if not links:
        return ""
    items = []
    for link in links:
        if link.thumb is None or link.full is None:
            items.append(f'<figure><div class="missing">{esc(link.problem)}</div>'
                         f"<figcaption>{esc(link.name)}</figcaption></figure>")
            continue
        size = f" · {link.size[0]}×{link.size[1]}" if link.size else ""
        items.append(f'<figure><a class="zoom" href="{esc(base + link.full)}"><img src="{esc(base + link.thumb)}" '
                     f'alt="{esc(link.name)}"></a><figcaption>{esc(link.name)}{size}</figcaption></figure>')
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


def call_html(call: ToolCallRecord, images: ReportImages, *, base: str) -> str:
    """One tool call: name, round, status, the code (or arguments), the output and output images;
    a failed call is marked ``failed`` (highlighted)."""
    status = badge("ok", "ok") if call.ok else badge("error", "err")
    took = f" · {call.duration_s:.2f} s" if call.duration_s is not None else ""
    code = call.args.get("code") if isinstance(call.args.get("code"), str) else None
    args = pre(code, limit=CODE_LIMIT) if code is not None else \
        pre(json.dumps(call.args, indent=2, ensure_ascii=False), limit=CODE_LIMIT)
    links = [images.from_ref(img.ref, img.name) for img in call.images]
    return (f'<div class="call{"" if call.ok else " failed"}"><div class="call-head"><code>{esc(call.name)}</code>'
            f'<span class="note">round {call.round + 1}{took}</span>{status}</div>{args}'
            f'{pre(format_output(call.output), limit=OUTPUT_LIMIT, cls="out")}{figures(links, base=base)}</div>')


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
                 verdict_rows(verdicts, rubrics), cls="wide verdicts", row_classes=[v.status for v in verdicts])


def turn_images(task: Task, index: int) -> list[tuple[TaskImage, str]]:
    """The task's own images shown with turn ``index`` (its prompt's images), with their file names."""
    spec = task.turns[index] if index < len(task.turns) else None
    return [(task.images[i], task.image_name(i)) for i in (spec.images if spec else []) if 0 <= i < len(task.images)]


def turn_html(index: int, task: Task | None, record: TurnRecord | None, verdicts: list[RubricVerdict],
              images: ReportImages, *, base: str) -> str:
    """One turn: prompt and images, tool calls, answer against the golden answer, verdicts under the answer."""
    spec = task.turns[index] if task and index < len(task.turns) else None
    parts = [f'<h3 id="turn-{index + 1}">Turn {index + 1}']
    if record is not None:
        parts.append(f" {badge(record.status.replace('_', ' '), record.status)}"
                     f' <span class="note">{record.tool_rounds} tool round(s), {len(record.tool_calls)} call(s)</span>')
    parts.append("</h3>")
    if spec is not None:
        parts.append(f'<h4>Prompt</h4><div class="text prompt">{esc(spec.prompt)}</div>')
        links = [images.from_task(image, name) for image, name in turn_images(task, index)] if task else []
        parts.append(figures(links, base=base))
    if record is not None and record.tool_calls:
        parts.append("<h4>Tool calls</h4>" + "".join(call_html(c, images, base=base) for c in record.tool_calls))
    answer = esc(record.answer) if record is not None else '<span class="note">no answer recorded</span>'
    golden = esc(spec.golden_answer) if spec is not None else '<span class="note">task not available</span>'
    parts.append(f'<div class="two"><div><h4>Answer</h4><div class="text answer">{answer}</div></div>'
                 f'<div><h4>Golden answer</h4><div class="text golden">{golden}</div></div></div>')
    if verdicts:
        rubrics = {r.id: r for r in spec.rubrics} if spec is not None else {}
        parts.append("<h4>Rubric verdicts on this answer</h4>" + verdict_table(verdicts, rubrics))
    return f'<div class="turn">{"".join(parts)}</div>'


def transcript_section(result: TaskResult, task: Task | None, images: ReportImages, *, base: str = "../") -> str:
    """The transcript part of a task page (the seam for the transcript record, see the module doc):
    every turn of ``result`` with ``task``'s prompts, images and golden answers where known.
    ``base`` leads from the page to the run directory (task pages live in ``RUN_DIR/tasks/``)."""
    by_turn: dict[int, list[RubricVerdict]] = defaultdict(list)
    for verdict in result.grade.verdicts:
        by_turn[verdict.turn].append(verdict)
    records = {t.index: t for t in result.episode.turns}
    count = max([len(task.turns) if task else 0, *(i + 1 for i in records), *(i + 1 for i in by_turn)])
    turns = "".join(turn_html(i, task, records.get(i), by_turn.get(i, []), images, base=base) for i in range(count))
    return f'<section id="transcript"><h2>Transcript</h2>{turns}</section>'
