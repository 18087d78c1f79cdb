"""The transcript section of a task page: what happened, turn by turn, beside how it was judged.

:func:`transcript_section` is the one seam a task page calls for it. Per turn: the prompt and its
images, then what happened, then the answer beside the golden answer with each rubric verdict right
under it. What happened comes from the task's transcript record (``transcripts/<stem>.json``,
:mod:`vtb_agents.transcript`) when the run has one: every model call, tool call and strategy step in
order (:mod:`vtb_agents.report.events_html`), and the judge events as the verdicts (explanation, judge
model, cached flag, prompt and raw verdict). A task without a transcript file falls back to the
``TaskResult``: its tool calls (failed ones highlighted) and verdicts, the same records the transcript's
events carry, drawn by the same functions (:func:`~vtb_agents.report.events_html.call_html`,
:func:`~vtb_agents.report.events_html.verdict_row`).

Task text, model output, tool output and judge justifications are untrusted and always escaped.
Images appear as thumbnails linking to full-size files (see :mod:`vtb_agents.report.images`); the
task page's script shows the full-size image over the page on a click.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from vtb_agents.report.events_html import (ModelCalls, call_html, event_html, figures, judge_table, verdict_row,
                                           verdict_table)
from vtb_agents.report.images import ReportImages
from vtb_agents.report.markup import badge, esc
from vtb_agents.report.regions_html import regions_html
from vtb_agents.results import RubricVerdict, TaskResult, TurnRecord
from vtb_agents.tasks.model import Task, TaskImage
from vtb_agents.transcript import JudgeEvent, Transcript

def turn_images(task: Task, index: int) -> list[tuple[TaskImage, str]]:
    """The task's own images shown with turn ``index`` (its prompt's images), with their file names."""
    spec = task.turns[index] if index < len(task.turns) else None
    return [(task.images[i], task.image_name(i)) for i in (spec.images if spec else []) if 0 <= i < len(task.images)]


@dataclass(frozen=True)
class TurnEvents:
    """A turn's part of the transcript: its events as HTML (model, tool and step events, in order) and
    its verdicts (judge events)."""

    html: str
    judges: list[JudgeEvent]


def turn_html(index: int, task: Task | None, record: TurnRecord | None, verdicts: list[RubricVerdict],
              images: ReportImages, *, base: str, events: TurnEvents | None = None) -> str:
    """One turn: prompt and images, what happened (the transcript's ``events`` when there is one, else the
    tool calls of the result), the answer against the golden answer, and the verdicts under the answer."""
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
    if events is not None and events.html:
        parts.append(f'<h4>Model calls, tool calls and strategy steps</h4><div class="events">{events.html}</div>')
    elif events is None and record is not None and record.tool_calls:
        parts.append("<h4>Tool calls</h4>" + "".join(call_html(c, images, base=base) for c in record.tool_calls))
    answer = esc(record.answer) if record is not None else '<span class="note">no answer recorded</span>'
    golden = esc(spec.golden_answer) if spec is not None else '<span class="note">task not available</span>'
    parts.append(f'<div class="two"><div><h4>Answer</h4><div class="text answer">{answer}</div></div>'
                 f'<div><h4>Golden answer</h4><div class="text golden">{golden}</div></div></div>')
    if record is not None:
        parts.append(regions_html(record, task, images, base=base))
    if events is not None and events.judges:
        parts.append("<h4>Rubric verdicts on this answer</h4>" + judge_table(events.judges))
    elif events is None and verdicts:
        rubrics = {r.id: r.description for r in spec.rubrics} if spec is not None else {}
        parts.append("<h4>Rubric verdicts on this answer</h4>"
                     + verdict_table(verdicts, [verdict_row(v, rubrics.get(v.rubric_id)) for v in verdicts]))
    return f'<div class="turn">{"".join(parts)}</div>'


def turn_events(transcript: Transcript, images: ReportImages, *, base: str) -> dict[int | None, TurnEvents]:
    """The transcript's events by turn (None: events outside any turn), rendered in order; model calls
    are numbered across the whole transcript."""
    html: dict[int | None, list[str]] = defaultdict(list)
    judges: dict[int | None, list[JudgeEvent]] = defaultdict(list)
    calls = ModelCalls()
    for event in transcript.events:
        if isinstance(event, JudgeEvent):
            judges[event.turn].append(event)
        else:
            html[event.turn].append(event_html(event, images, calls, base=base))
    return {turn: TurnEvents("".join(html.get(turn, [])), judges.get(turn, [])) for turn in {*html, *judges}}


def transcript_section(result: TaskResult, task: Task | None, images: ReportImages, *, base: str = "../",
                       transcript: Transcript | None = None) -> str:
    """The transcript part of a task page: every turn of ``result`` with ``task``'s prompts, images and
    golden answers where known, and the events of ``transcript`` (the task's transcript record; None for
    a task without one: then the tool calls and verdicts of ``result``).
    ``base`` leads from the page to the run directory (task pages live in ``RUN_DIR/tasks/``)."""
    by_turn: dict[int, list[RubricVerdict]] = defaultdict(list)
    for verdict in result.grade.verdicts:
        by_turn[verdict.turn].append(verdict)
    records = {t.index: t for t in result.episode.turns}
    events = turn_events(transcript, images, base=base) if transcript is not None else None
    turn_ids = [i for i in (events or {}) if i is not None]
    count = max([len(task.turns) if task else 0, *(i + 1 for i in records), *(i + 1 for i in by_turn),
                 *(i + 1 for i in turn_ids)])
    empty = TurnEvents("", []) if events is not None else None
    turns = "".join(turn_html(i, task, records.get(i), by_turn.get(i, []), images, base=base,
                              events=events.get(i, empty) if events is not None else None) for i in range(count))
    outside = events.get(None) if events is not None else None
    if outside is not None:
        turns += '<div class="turn"><h3>Outside any turn</h3>' + f'<div class="events">{outside.html}</div>' + (
            judge_table(outside.judges) if outside.judges else "") + "</div>"
    source = "the task's transcript" if transcript is not None else "the run's results (no transcript recorded)"
    return f'<section id="transcript"><h2>Transcript</h2><p class="note">From {source}.</p>{turns}</section>'
