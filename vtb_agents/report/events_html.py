"""HTML of a task transcript's events (:mod:`vtb_agents.transcript`): model calls, tool calls, strategy
steps and rubric verdicts, for the task pages (:mod:`vtb_agents.report.transcript_html`) and the
annotate page (:mod:`vtb_agents.annotate.server`), which both call :func:`event_html`.

- A model call shows its step, the response (reasoning, text, tool calls) open, and the request
  (messages as sent, images as thumbnails; a request that extends the step's previous one shows only
  its new messages) and the parameters collapsed; tokens, latency; an error is highlighted (``failed``).
- A tool call (its :class:`~vtb_agents.results.ToolCallRecord`, the one record of a call in results and
  transcripts: :func:`call_html`) shows its arguments (the code), output, saved images, duration; a
  failed one is ``.call.failed``.
- A strategy step sits in ``<div class="step">``: its text (plan, critique), data (zoom proposals and
  boxes) and the images it made (views, marked images).
- :func:`judge_table`: each rubric's verdict (its :class:`~vtb_agents.results.RubricVerdict`, one row
  layout: :func:`verdict_row`) with justification, judge, cached flag, and the judge prompt and raw
  verdict collapsed.

Everything from the model, the tools, the task or the judge is escaped (:func:`~vtb_agents.report.markup.esc`).
Images are links from an :class:`ImageSource`: the report's files (thumbnail, full size) or the annotate
server's routes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from vtb_agents.report.images import ImageLink
from vtb_agents.report.markup import badge, esc, pre, table
from vtb_agents.results import RubricVerdict, SavedImage, ToolCallRecord
from vtb_agents.transcript import Event, JudgeEvent, ModelCall, ModelEvent, StepEvent, ToolEvent, image_refs

OUTPUT_LIMIT = 8_000
CODE_LIMIT = 20_000
TEXT_LIMIT = 20_000


class ImageSource(Protocol):
    """Where the page finds an image the run stored in ``artifacts/`` (by its sha256)."""

    def from_ref(self, ref: str, name: str) -> ImageLink:
        """The thumbnail and full-size link of artifact ``ref``, or why there is none."""
        ...


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


def args_html(args: Any) -> str:
    """A tool call's arguments: the code of a code tool as it is, anything else as JSON."""
    code = args.get("code") if isinstance(args, dict) else None
    if isinstance(code, str):
        return pre(code, limit=CODE_LIMIT)
    return pre(json.dumps(args, indent=2, ensure_ascii=False, default=str), limit=CODE_LIMIT)


def call_html(call: ToolCallRecord, images: ImageSource, *, base: str, step: str | None = None) -> str:
    """One tool call's box (the one layout of a tool call, from a transcript or a result): name, where
    it ran (``step``, round, duration), status, arguments, output, saved images, and the error seen;
    ``failed`` when the call failed."""
    note = " · ".join([*([step] if step else []), *([f"round {call.round + 1}"] if call.round is not None else []),
                       *([f"{call.duration_s:.2f} s"] if call.duration_s is not None else [])])
    status = badge("ok", "ok") if call.ok else badge("error", "err")
    error = call.error
    shown_error = f'<div class="error-line">{esc(error)}</div>' if error and error not in call.output else ""
    return (f'<div class="call{"" if call.ok else " failed"}"><div class="call-head"><code>{esc(call.name)}</code>'
            f'<span class="note">{esc(note)}</span>{status}</div>{args_html(call.args)}'
            f'{pre(format_output(call.output), limit=OUTPUT_LIMIT, cls="out")}{shown_error}'
            f'{saved_figures(call.images, images, base=base)}</div>')


def saved_figures(found: list[SavedImage], images: ImageSource, *, base: str) -> str:
    """The images a tool call or a step saved, as thumbnails."""
    return figures([images.from_ref(image.ref, image.name) for image in found], base=base)


def step_html(event: StepEvent, images: ImageSource, *, base: str) -> str:
    """A strategy step's own artefacts, set apart: text (plan, critique), data (zoom boxes), images."""
    op = f" · {event.image_op}" if event.image_op else ""
    parts = [f'<div class="step" data-step="{esc(event.step)}"><div class="step-head">{esc(event.step)}'
             f'<span class="note">{esc(op)}</span></div>']
    if event.text:
        parts.append(f'<div class="text step-text">{esc(event.text)}</div>')
    if event.data:
        parts.append(pre(json.dumps(event.data, indent=2, ensure_ascii=False, default=str), limit=CODE_LIMIT,
                         cls="data"))
    parts.append(saved_figures(event.images, images, base=base))
    return "".join(parts) + "</div>"


def content_html(content: Any, images: ImageSource, *, base: str) -> str:
    """A message's content: its text parts and its images (thumbnails), in order."""
    if isinstance(content, str):
        return f'<div class="text">{esc(content)}</div>' if content else ""
    parts: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        refs = image_refs(block)
        if refs:
            parts.append(figures([images.from_ref(ref, f"image {ref[:10]}") for ref in refs], base=base))
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(f'<div class="text">{esc(block["text"])}</div>')
        elif isinstance(block, dict) and block.get("type") in ("reasoning", "thinking"):
            continue  # shown as the reply's reasoning
        elif block:
            parts.append(pre(json.dumps(block, ensure_ascii=False, default=str), limit=OUTPUT_LIMIT))
    return "".join(parts)


def calls_text(calls: list[dict[str, Any]]) -> str:
    """Tool calls as ``name(args)`` lines."""
    return "\n".join(f"{c.get('name')}({json.dumps(c.get('args'), ensure_ascii=False, default=str)})" for c in calls)


def messages_html(messages: list[dict[str, Any]], images: ImageSource, *, base: str) -> str:
    """Request messages: role, content (text and images) and the tool calls an assistant message made."""
    rows = []
    for message in messages:
        role = str(message.get("role", "?"))
        calls = message.get("tool_calls") or []
        shown = content_html(message.get("content"), images, base=base)
        if calls:
            shown += pre(calls_text(calls), limit=CODE_LIMIT, cls="tool-calls")
        rows.append(f'<div class="msg" data-role="{esc(role)}"><span class="role">{esc(role)}</span>{shown}</div>')
    return "".join(rows)


def response_html(call: ModelCall) -> str:
    """The reply of a model call: reasoning, text, tool calls (invalid ones highlighted), error."""
    parts = []
    if call.error:
        parts.append(f'<div class="error-line">{esc(call.error)}</div>')
    reply = call.response
    if reply is None:
        return "".join(parts)
    if reply.reasoning:
        parts.append(f'<div class="reasoning"><span class="role">reasoning</span>'
                     f'<div class="text">{esc(reply.reasoning)}</div></div>')
    if reply.text:
        parts.append(f'<div class="text response">{esc(reply.text[:TEXT_LIMIT])}</div>')
    if reply.tool_calls:
        parts.append(pre(calls_text(reply.tool_calls), limit=CODE_LIMIT, cls="tool-calls"))
    if reply.invalid_tool_calls:
        parts.append('<div class="error-line">invalid tool calls</div>'
                     + pre(json.dumps(reply.invalid_tool_calls, ensure_ascii=False, default=str), limit=CODE_LIMIT))
    return "".join(parts)


def call_facts(call: ModelCall) -> str:
    """Model, latency, tokens and image count of a model call, one line."""
    facts = [call.model or "model"]
    if call.cached:
        facts.append("cached: answered by the model cache")
    if call.latency_s is not None:
        facts.append(f"{call.latency_s:.2f} s")
    if call.tokens is not None:
        facts.append(f"{call.tokens.input_tokens} in / {call.tokens.output_tokens} out tokens")
    facts.append(f"{len(call.images)} image(s)")
    return " · ".join(facts)


@dataclass
class ModelCalls:
    """The model calls of a page so far, so that a request extending the previous request of the same
    step shows only its new messages (a conversation re-sends everything before)."""

    count: int = 0
    last: dict[str, tuple[int, ModelEvent]] = field(default_factory=dict)

    def new_messages(self, event: ModelEvent) -> tuple[int, list[dict[str, Any]], str]:
        """(this call's number, its messages not shown before, a note on those left out)."""
        self.count += 1
        messages, note = event.messages, ""
        before = self.last.get(event.step)
        if before is not None and messages[:len(before[1].messages)] == before[1].messages:
            note = f'<p class="note">{len(before[1].messages)} earlier message(s) as in model call #{before[0]}</p>'
            messages = messages[len(before[1].messages):]
        self.last[event.step] = (self.count, event)
        return self.count, messages, note


def model_html(event: ModelEvent, images: ImageSource, calls: ModelCalls, *, base: str) -> str:
    """A model call: head (step, facts), the response open, the request and parameters collapsed."""
    number, messages, note = calls.new_messages(event)
    status = badge("error", "err") if event.error else badge("ok", "ok")
    if event.cached:
        status += badge("cached", "cached")
    params = json.dumps(event.params, indent=2, ensure_ascii=False, default=str)
    return (f'<div class="model-call{" failed" if event.error else ""}" data-step="{esc(event.step)}" '
            f'data-cached="{"yes" if event.cached else "no"}">'
            f'<div class="call-head"><b>#{number}</b><code>{esc(event.step)}</code>'
            f'<span class="note">{esc(call_facts(event))}</span>{status}</div>'
            f'<details class="request"><summary>request: {len(event.messages)} message(s), '
            f'{len(event.images)} image(s)</summary>{note}{messages_html(messages, images, base=base)}</details>'
            f'<details class="params"><summary>parameters</summary>{pre(params, limit=CODE_LIMIT)}</details>'
            f'<div class="reply">{response_html(event)}</div></div>')


def event_html(event: Event, images: ImageSource, calls: ModelCalls, *, base: str) -> str:
    """One model, tool or step event (judge events go in :func:`judge_table`, beside the answer)."""
    if isinstance(event, ModelEvent):
        return model_html(event, images, calls, base=base)
    if isinstance(event, ToolEvent):
        return call_html(event.call, images, base=base, step=event.step)
    if isinstance(event, StepEvent):
        return step_html(event, images, base=base)
    return ""


def judge_details(event: JudgeEvent) -> str:
    """The judge prompt and its raw verdicts (each judge model call), collapsed."""
    if event.prompt is None and not event.calls:
        return ""
    parts = []
    if event.prompt is not None:
        parts.append("<h4>Judge prompt</h4>" + pre(event.prompt, limit=TEXT_LIMIT))
    for call in event.calls:
        raw = call.response.text if call.response is not None else ""
        parts.append(f'<h4>Raw verdict <span class="note">{esc(call_facts(call))}</span></h4>'
                     + pre(raw or call.error or "", limit=TEXT_LIMIT, cls="error" if call.error else "raw"))
    return f'<details class="judge-call"><summary>prompt and raw verdict</summary>{"".join(parts)}</details>'


def verdict_row(verdict: RubricVerdict, rubric: str | None, details: str = "", note: str = "") -> list[str]:
    """The table row of one verdict (the one layout of a verdict, from a transcript or a result): rubric
    id and text, weight, critical (and the dataset's flag where it differs), status, judge (``note``
    after it), justification and ``details`` (HTML: the judge prompt and raw verdict)."""
    critical = "yes" if verdict.critical else "no"
    if verdict.critical != verdict.critical_flag:
        critical += f' <span class="note">(dataset flag: {"yes" if verdict.critical_flag else "no"})</span>'
    judge = esc(verdict.judge) + (' <span class="note">(cached verdict)</span>' if verdict.cached else "") + note
    return [esc(verdict.rubric_id), esc(rubric) if rubric is not None else '<span class="note">-</span>',
            esc(verdict.weight), critical, badge(verdict.status.replace("_", " "), verdict.status), judge,
            esc(verdict.justification) + details]


def verdict_table(verdicts: list[RubricVerdict], rows: list[list[str]]) -> str:
    """A turn's verdicts (``rows`` from :func:`verdict_row`), colour-coded by status."""
    return table(["rubric", "description", "weight", "critical", "status", "judge", "justification"], rows,
                 cls="wide verdicts", row_classes=[v.status for v in verdicts])


def judge_table(events: list[JudgeEvent]) -> str:
    """The verdicts of one turn from the transcript: each verdict's row with the rubric's text, the
    judge prompt and raw verdict, and whether the judge's call came from the model cache."""
    rows = [verdict_row(event.verdict, event.rubric, judge_details(event),
                        ' <span class="note">(judge call from the model cache)</span>'
                        if any(call.cached for call in event.calls) else "") for event in events]
    return verdict_table([event.verdict for event in events], rows)
