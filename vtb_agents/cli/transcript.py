"""``vtb transcript RUN TASK_ID``: one task's transcript in the terminal, or as JSON (docs/reference/transcripts.md).

The terminal view shows every event in order: model calls (the messages new since the step's
previous request, the reply, its reasoning and tool calls, tokens and latency), tool calls
(arguments, output, saved images, errors in red), the strategy's own steps and the rubric
verdicts. Images are shown as the paths of their bytes under ``RUN/artifacts/``. ``--json``
prints the transcript as it is stored: ``{"task_id", "events": [...]}``.

Everything a model, a tool or a task wrote is printed terminal-safe (:mod:`vtb_agents.terminal`):
control characters (terminal escape sequences, carriage returns) are shown as escapes such as
``\x1b``, and nothing is read as rich markup; ``--json`` escapes them the JSON way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vtb_agents.cli.common import cli_app, fail, out
from vtb_agents.terminal import safe, safe_json, safe_text

if TYPE_CHECKING:
    from rich.console import RenderableType

    from vtb_agents.artifacts import ArtifactStore
    from vtb_agents.transcript import Event, JudgeEvent, ModelEvent, StepEvent, ToolEvent, Transcript

transcript_cli = cli_app()

TEXT_CHARS = 2_000
"""Longest text of one message or output shown in the terminal (``--json`` has it all)."""
STATUS_STYLE = {"met": "green", "not_met": "red", "unjudged": "yellow", "error": "bold red"}


@transcript_cli.command("transcript")
def transcript(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
               task_id: str = typer.Argument(..., help="The task's id (as in results.jsonl)."),
               as_json: bool = typer.Option(False, "--json", help='Print {"task_id", "events": [...]} as JSON.'),
               epoch: int = typer.Option(1, "--epoch", min=1, help="Which epoch of the task (1 unless the run "
                                                                    "had several)."),
               ) -> None:
    """Print one task's transcript: every model call, tool call, strategy step and rubric verdict,
    in order, with images as paths under RUN/artifacts/."""
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.rundir.transcripts import open_transcript

    try:
        record = open_transcript(run_dir, task_id, epoch)
    except RunError as exc:
        fail(str(exc))
        return
    if as_json:
        print(safe_json(record.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return
    from vtb_agents.artifacts import ArtifactStore
    from vtb_agents.rundir.layout import artifacts_dir

    for renderable in render(record, ArtifactStore(artifacts_dir(run_dir))):
        out.print(renderable, highlight=False, soft_wrap=True)


def render(record: Transcript, artifacts: ArtifactStore) -> list[RenderableType]:
    """The terminal view of ``record``, images shown as their paths in ``artifacts``."""
    from collections import Counter

    from rich.rule import Rule
    from rich.text import Text

    counts = Counter(event.kind for event in record.events)
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no events"
    shown: list[RenderableType] = [Text.assemble(("task ", "bold"), (safe(record.task_id), "bold cyan"),
                                                 safe(f": {summary}"))]
    previous: dict[str, tuple[int, ModelEvent]] = {}
    for number, event in enumerate(record.events, start=1):
        shown.append(Rule(safe_text(heading(number, event)), align="left", style="red" if failed(event) else "dim"))
        shown.extend(body(number, event, artifacts, previous))
    return shown


def failed(event: Event) -> bool:
    """Whether the event is an error (a failed model or tool call, a judge error)."""
    if event.kind == "judge":
        return event.status == "error"
    return bool(getattr(event, "error", None))


def heading(number: int, event: Event) -> str:
    """One event's title line: number, kind, step, turn and what is measured."""
    parts = [f"#{number} {event.kind}", event.step]
    if event.turn is not None:
        parts.append(f"turn {event.turn + 1}")
    if event.kind == "model":
        if event.latency_s is not None:
            parts.append(f"{event.latency_s:.2f} s")
        if event.tokens is not None:
            parts.append(f"{event.tokens.input_tokens} in / {event.tokens.output_tokens} out tokens")
        parts.append(f"{len(event.images)} image(s)")
    elif event.kind == "tool":
        parts.append(event.name + (f" {event.duration_s:.2f} s" if event.duration_s is not None else ""))
    elif event.kind == "judge":
        parts.append(f"{event.rubric_id}: {event.status}" + (" (cached)" if event.cached else ""))
    return " · ".join(parts)


def body(number: int, event: Event, artifacts: ArtifactStore,
         previous: dict[str, tuple[int, ModelEvent]]) -> list[RenderableType]:
    """The lines under one event's heading."""
    if event.kind == "model":
        return model_lines(number, event, artifacts, previous)
    if event.kind == "tool":
        return tool_lines(event, artifacts)
    if event.kind == "step":
        return step_lines(event, artifacts)
    return judge_lines(event)


def clip(text: str) -> str:
    """``text`` cut to :data:`TEXT_CHARS` (saying how much is left out), terminal-safe (:func:`safe`)."""
    shown = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f" [... {len(text) - TEXT_CHARS} more characters]"
    return safe(shown)


def image_path(sha256: str, artifacts: ArtifactStore) -> str:
    """Where the bytes of an image are (or a note when they are missing)."""
    path = artifacts.path(sha256)
    return str(path) if path.exists() else f"{path} (missing)"


def content_lines(content: Any, artifacts: ArtifactStore) -> list[str]:
    """A message's content as lines: its text, and each image as ``[image] PATH``."""
    from vtb_agents.transcript import image_refs

    if isinstance(content, str):
        return [clip(content)] if content else []
    lines: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        refs = image_refs(block)
        if refs:
            lines += [f"[image] {image_path(ref, artifacts)}" for ref in refs]
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            lines.append(clip(block["text"]))
        elif isinstance(block, dict) and block.get("type") in ("reasoning", "thinking"):
            continue  # shown as the reply's reasoning
        elif block:
            lines.append(clip(json.dumps(block, ensure_ascii=False)))
    return lines


def model_lines(number: int, event: ModelEvent, artifacts: ArtifactStore,
                previous: dict[str, tuple[int, ModelEvent]]) -> list[RenderableType]:
    """A model call: the request's messages (those new since the previous request of the same step
    when it extends it), then the reply."""
    from rich.text import Text

    messages = event.messages
    lines: list[RenderableType] = []
    before = previous.get(event.step)
    if before is not None and messages[:len(before[1].messages)] == before[1].messages:
        lines.append(safe_text(f"  ({len(before[1].messages)} earlier message(s) as in #{before[0]})", style="dim"))
        messages = messages[len(before[1].messages):]
    previous[event.step] = (number, event)
    for message in messages:
        role = str(message.get("role", "?"))
        text = content_lines(message.get("content"), artifacts)
        calls = [f"-> {c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in message.get("tool_calls", [])]
        first, *rest = [*text, *calls] or [""]
        lines.append(Text.assemble((safe(f"  {role}: "), "bold"), safe(first)))
        lines += [safe_text("    " + line) for line in rest]
    if event.error:
        lines.append(safe_text(f"  error: {event.error}", style="bold red"))
    reply = event.response
    if reply is None:
        return lines
    if reply.reasoning:
        lines.append(safe_text(f"  reasoning: {clip(reply.reasoning)}", style="italic dim"))
    lines.append(Text.assemble(("  reply: ", "bold green"), clip(reply.text)))
    for call in reply.tool_calls:
        lines.append(safe_text(f"    -> {call.get('name')}({json.dumps(call.get('args'), ensure_ascii=False)})",
                               style="cyan"))
    for call in reply.invalid_tool_calls:
        lines.append(safe_text(f"    invalid tool call: {json.dumps(call, ensure_ascii=False)}", style="bold red"))
    return lines


def tool_lines(event: ToolEvent, artifacts: ArtifactStore) -> list[RenderableType]:
    """A tool call: arguments, output, saved images (paths), error."""

    args = event.args.get("code") if isinstance(event.args, dict) and set(event.args) == {"code"} else None
    lines: list[RenderableType] = [safe_text("  args: " + (clip(args) if isinstance(args, str) else
                                                            clip(json.dumps(event.args, ensure_ascii=False))))]
    lines.append(safe_text("  output: " + clip(event.output), style="red" if event.error else ""))
    lines += [safe_text(f"  [image] {image.name}: {image_path(image.sha256, artifacts)}") for image in event.images]
    if event.error:
        lines.append(safe_text(f"  error: {clip(event.error)}", style="bold red"))
    return lines


def step_lines(event: StepEvent, artifacts: ArtifactStore) -> list[RenderableType]:
    """A strategy step: its text (plan, critique, proposal), its data and the images it made."""

    lines: list[RenderableType] = []
    if event.text:
        lines.append(safe_text("  " + clip(event.text), style="magenta"))
    if event.data:
        lines.append(safe_text("  " + clip(json.dumps(event.data, ensure_ascii=False)), style="dim"))
    op = f" ({event.image_op})" if event.image_op else ""
    lines += [safe_text(f"  [image{op}] {image.name}: {image_path(image.sha256, artifacts)}") for image in event.images]
    return lines


def judge_lines(event: JudgeEvent) -> list[RenderableType]:
    """A rubric verdict: the rubric, who decided, the status and explanation, the judge's replies."""
    from rich.text import Text

    critical = ", critical" if event.critical else ""
    lines: list[RenderableType] = [
        safe_text(f"  rubric (weight {event.weight}{critical}): {clip(event.rubric)}"),
        Text.assemble("  ", (safe(event.status), STATUS_STYLE.get(event.status, "")), safe(f" by {event.judge}: "),
                      clip(event.explanation)),
    ]
    for call in event.calls:
        raw = call.response.text if call.response is not None else ""
        latency = f"{call.latency_s:.2f} s" if call.latency_s is not None else "?"
        lines.append(safe_text(f"  judge call ({call.model or 'model'}, {latency}): {clip(raw or call.error or '')}",
                               style="red" if call.error else "dim"))
    return lines
