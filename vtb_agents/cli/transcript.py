"""``vtb transcript RUN TASK_ID``: one task's transcript in the terminal, or as JSON (docs/reference/transcripts.md).

The terminal view shows every event in order: model calls (the messages new since the step's
previous request, the reply, its reasoning and tool calls, tokens and latency), tool calls
(arguments, output, saved images, errors in red), the strategy's own steps and the rubric
verdicts. Images are shown as the paths of their bytes under ``RUN/artifacts/``. ``--json``
prints the transcript as it is stored: ``{"task_id", "events": [...]}``.
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
    from rich.text import Text

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
    """Print one task's transcript: its result (pass, score, outcome, epoch, cost, calls from the caches),
    then every model call, tool call, strategy step and rubric verdict, in order, with images as paths
    under RUN/artifacts/. Lines wrap at the terminal's width (COLUMNS); code is indented under its
    call and highlighted on a terminal."""
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.rundir.transcripts import open_transcript

    from vtb_agents.rundir.store import ResultsError

    try:
        record = open_transcript(run_dir, task_id, epoch)
        header = [] if as_json else result_header(run_dir, task_id, epoch)
    except (RunError, ResultsError) as exc:  # another format version, a damaged file: one line
        fail(str(exc))
        return
    if as_json:
        print(safe_json(record.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return
    from vtb_agents.artifacts import ArtifactStore
    from vtb_agents.rundir.layout import artifacts_dir

    for renderable in render(record, ArtifactStore(artifacts_dir(run_dir)), header=header,
                             highlight=out.console.is_terminal):
        out.print(renderable, highlight=False)


def model_text(text: str, style: str = "") -> Text:
    """Text that comes from the model, a tool, the task or the judge, as printed: every such text of
    the transcript goes through here, terminal-safe (control characters shown as escapes,
    :func:`vtb_agents.terminal.safe_text`) and never read as markup."""
    return safe_text(text, style=style)


def indent(renderable: RenderableType, level: int = 1) -> RenderableType:
    """``renderable`` indented by ``level`` steps of two columns, wrapped lines too."""
    from rich.padding import Padding

    return Padding(renderable, (0, 0, 0, 2 * level), expand=False)


def result_header(run_dir: Path, task_id: str, epoch: int) -> list[RenderableType]:
    """The task's result line: pass, score, outcome, epoch, cost (at the prices the run recorded); where it
    looked (best crop IoU per measured turn, or "not located"); nothing when results.jsonl has no line for it."""
    from rich.text import Text

    from vtb_agents.analysis.cost import recorded_prices, task_cost
    from vtb_agents.report.markup import num
    from vtb_agents.report.regions_html import iou_text
    from vtb_agents.report.usage import usd
    from vtb_agents.rundir.read import read_record
    from vtb_agents.rundir.store import ResultsStore

    results, _ = ResultsStore(run_dir).load()
    found = [r for r in results if r.task_id == task_id and r.epoch == epoch]
    if not found:
        return []
    result = found[-1]
    cost = task_cost(result, recorded_prices(read_record(run_dir)))  # as the run recorded them
    grade = result.grade
    verdict = ("ungraded", "yellow") if not grade.graded else (("pass", "bold green") if grade.passed
                                                                else ("fail", "bold red"))
    line = Text.assemble(verdict, f" · score {num(grade.score)} · outcome {result.ended.replace('_', ' ')} · "
                                  f"epoch {epoch} · cost {usd(cost)} · {result.duration_s:.1f} s")
    lines: list[RenderableType] = [line]
    looked = [f"turn {turn.index + 1} {iou_text(turn)}" for turn in result.episode.turns
              if turn.reference_regions or turn.not_located]
    if looked:
        lines.append(Text("where it looked (best crop IoU; >= 0.5 looked): " + ", ".join(looked)))
    if not grade.graded and grade.reason:
        lines.append(Text.assemble(("ungraded: ", "yellow"), model_text(grade.reason)))
    return lines


def render(record: Transcript, artifacts: ArtifactStore, *, header: list[RenderableType] | None = None,
           highlight: bool = False) -> list[RenderableType]:
    """The terminal view of ``record``, images shown as their paths in ``artifacts``: the ``header``
    (the task's result), the calls the caches answered, then every event; ``highlight``: code
    syntax-highlighted (a terminal)."""
    from collections import Counter

    from rich.text import Text

    counts = Counter(event.kind for event in record.events)
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no events"
    shown: list[RenderableType] = [Text.assemble(("task ", "bold"), model_text(record.task_id, "bold cyan"),
                                                 f": {summary}"),
                                   *(header or []), Text(record.cache_counts().text(), style="dim")]
    previous: dict[str, tuple[int, ModelEvent]] = {}
    for number, event in enumerate(record.events, start=1):
        shown.append(model_text(f"━━ {heading(number, event)}", "bold red" if failed(event) else "bold"))
        shown.extend(indent(line) for line in body(number, event, artifacts, previous, highlight))
    return shown


def failed(event: Event) -> bool:
    """Whether the event is an error (a failed model or tool call, a judge error)."""
    if event.kind == "judge":
        return event.verdict.status == "error"
    if event.kind == "tool":
        return not event.call.ok
    return bool(getattr(event, "error", None))


def heading(number: int, event: Event) -> str:
    """One event's title line: number, kind, step, turn and what is measured (a judge's status and
    whether a cache answered before the rubric's id)."""
    parts = [f"#{number} {event.kind}", *([event.step] if event.step != event.kind else [])]
    if event.turn is not None:
        parts.append(f"turn {event.turn + 1}")
    if event.kind == "model":
        if event.cached:
            parts.append("cached (model cache)")
        if event.latency_s is not None:
            parts.append(f"{event.latency_s:.2f} s")
        if event.tokens is not None:
            parts.append(f"{event.tokens.input_tokens} in / {event.tokens.output_tokens} out tokens")
        parts.append(f"{len(event.images)} image(s)")
    elif event.kind == "tool":
        took = event.call.duration_s
        parts.append(event.call.name + (f" {took:.2f} s" if took is not None else ""))
    elif event.kind == "judge":
        parts.append(event.verdict.status + (" (cached verdict)" if event.verdict.cached else ""))
        parts.append(f"rubric {event.verdict.rubric_id}")
    return " · ".join(parts)


def body(number: int, event: Event, artifacts: ArtifactStore,
         previous: dict[str, tuple[int, ModelEvent]], highlight: bool = False) -> list[RenderableType]:
    """The lines under one event's heading."""
    if event.kind == "model":
        return model_lines(number, event, artifacts, previous, highlight)
    if event.kind == "tool":
        return tool_lines(event, artifacts, highlight)
    if event.kind == "step":
        return step_lines(event, artifacts)
    return judge_lines(event)


def clip(text: str) -> str:
    """``text`` cut to :data:`TEXT_CHARS` (saying how much is left out)."""
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f" [... {len(text) - TEXT_CHARS} more characters]"


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


def code_block(code: str, highlight: bool) -> RenderableType:
    """Code as a block of its own (indented by the caller), Python-highlighted on a terminal."""
    if not highlight:
        return model_text(clip(code))
    from rich.syntax import Syntax

    return Syntax(safe(clip(code)), "python", word_wrap=True, background_color="default", theme="ansi_dark")


def call_lines(name: Any, args: Any, highlight: bool, style: str = "cyan") -> list[RenderableType]:
    """A tool call as asked: ``-> name(args)``, code (the ``code`` argument) as an indented block."""
    from rich.text import Text

    code = args.get("code") if isinstance(args, dict) and set(args) == {"code"} else None
    if isinstance(code, str):
        return [Text.assemble(("-> ", style), model_text(str(name), style), ("(code):", style)),
                indent(code_block(code, highlight))]
    return [Text.assemble(("-> ", style), model_text(str(name), style), ("(", style),
                          model_text(clip(json.dumps(args, ensure_ascii=False)), style), (")", style))]


def model_lines(number: int, event: ModelEvent, artifacts: ArtifactStore,
                previous: dict[str, tuple[int, ModelEvent]], highlight: bool = False) -> list[RenderableType]:
    """A model call: the request's messages (those new since the previous request of the same step
    when it extends it), then the reply."""
    from rich.text import Text

    messages = event.messages
    lines: list[RenderableType] = []
    before = previous.get(event.step)
    if before is not None and messages[:len(before[1].messages)] == before[1].messages:
        lines.append(Text(f"({len(before[1].messages)} earlier message(s) as in #{before[0]})", style="dim"))
        messages = messages[len(before[1].messages):]
    previous[event.step] = (number, event)
    for message in messages:
        role = str(message.get("role", "?"))
        text = content_lines(message.get("content"), artifacts)
        lines.append(model_text(f"{role}:", "bold"))
        lines += [indent(model_text(line)) for line in text]
        lines += [indent(line) for call in message.get("tool_calls", [])
                  for line in call_lines(call.get("name"), call.get("args"), highlight, style="")]
    if event.error:
        lines.append(Text.assemble(("error: ", "bold red"), model_text(event.error, "bold red")))
    reply = event.response
    if reply is None:
        return lines
    if reply.reasoning:
        lines.append(Text.assemble(("reasoning: ", "italic dim"), model_text(clip(reply.reasoning), "italic dim")))
    lines.append(Text.assemble(("reply: ", "bold green"), model_text(clip(reply.text))))
    lines += [indent(line) for call in reply.tool_calls
              for line in call_lines(call.get("name"), call.get("args"), highlight)]
    for call in reply.invalid_tool_calls:
        lines.append(indent(Text.assemble(("invalid tool call: ", "bold red"),
                                          model_text(json.dumps(call, ensure_ascii=False), "bold red"))))
    return lines


def tool_lines(event: ToolEvent, artifacts: ArtifactStore, highlight: bool = False) -> list[RenderableType]:
    """A tool call (its record): arguments (code as an indented block), output, saved images (paths), error."""
    from rich.text import Text

    call = event.call
    code = call.args.get("code") if isinstance(call.args, dict) and set(call.args) == {"code"} else None
    lines: list[RenderableType]
    if isinstance(code, str):
        lines = [Text("code:", style="bold"), indent(code_block(code, highlight))]
    else:
        lines = [Text.assemble(("args: ", "bold"), model_text(clip(json.dumps(call.args, ensure_ascii=False))))]
    lines += [Text("output:", style="bold"), indent(model_text(clip(call.output), "" if call.ok else "red"))]
    lines += [Text.assemble(("[image] ", "bold"), model_text(image.name), f": {image_path(image.ref, artifacts)}")
              for image in call.images]
    if call.error:
        lines.append(Text.assemble(("error: ", "bold red"), model_text(clip(call.error), "bold red")))
    return lines


def step_lines(event: StepEvent, artifacts: ArtifactStore) -> list[RenderableType]:
    """A strategy step: its text (plan, critique, proposal), its data and the images it made."""
    from rich.text import Text

    lines: list[RenderableType] = []
    if event.text:
        lines.append(model_text(clip(event.text), "magenta"))
    if event.data:
        lines.append(model_text(clip(json.dumps(event.data, ensure_ascii=False)), "dim"))
    op = f" ({event.image_op})" if event.image_op else ""
    lines += [Text.assemble((f"[image{op}] ", "bold"), model_text(image.name),
                            f": {image_path(image.ref, artifacts)}") for image in event.images]
    return lines


def judge_lines(event: JudgeEvent) -> list[RenderableType]:
    """A rubric verdict: the rubric, who decided, the status and explanation, the judge's replies."""
    from rich.text import Text

    verdict = event.verdict
    critical = ", critical" if verdict.critical else ""
    lines: list[RenderableType] = [
        Text.assemble((f"rubric (weight {verdict.weight}{critical}): ", "bold"), model_text(clip(event.rubric))),
        Text.assemble((verdict.status, STATUS_STYLE.get(verdict.status, "")), " by ", model_text(verdict.judge), ": ",
                      model_text(clip(verdict.justification))),
    ]
    for call in event.calls:
        raw = call.response.text if call.response is not None else ""
        latency = f"{call.latency_s:.2f} s" if call.latency_s is not None else "?"
        cached = ", model cache" if call.cached else ""
        style = "red" if call.error else "dim"
        lines.append(Text.assemble(model_text(f"judge call ({call.model or 'model'}, {latency}{cached}): ", style),
                                   model_text(clip(raw or call.error or ""), style)))
    return lines
