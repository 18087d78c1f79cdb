"""The transcript of one task: every model call, tool call, strategy step and judge call, in order.

Why: a score says *what*, the transcript says *why*. It is written once per task (and epoch) to
``RUN_DIR/transcripts/<stem>.json`` when the task ends (:mod:`vtb_agents.rundir.transcripts`,
the one reader and writer), recorded by the one recorder of the episode driver
(:mod:`vtb_agents.episodes.recorder`), and read by ``vtb transcript RUN TASK_ID`` and the report.

Images are never inlined: wherever a request has an image, the transcript holds ``{"sha256": <hex>}``,
the sha256 of the exact bytes (the bytes sent, after downscaling); an image a tool or a strategy step
saved is a :class:`~vtb_agents.results.SavedImage`, whose ``ref`` is that hash. The bytes are stored
once in the run's ``artifacts/`` under the hash (``artifacts/<first two hex digits>/<sha256>.img``).

Schema (JSON, docs/reference/transcripts.md)::

    {"format_version": int,           # TRANSCRIPT_FORMAT: a reader refuses any other
     "task_id": str,
     "events": [                      # in the order they happened (judge events last, by rubric)
       {"kind": "model", "step": str, "turn": int | null,
        "model": str | null,          # the model name the parameters give
        "messages": [{"role", "content", "name"?, "tool_calls"?, "tool_call_id"?}],  # as sent; images {"sha256"}
        "images": [{"sha256": str}],  # every image of the request, in order (an image sent twice is listed twice)
        "params": {...},              # invocation parameters (model, temperature, tools, ...)
        "response": {"text", "content", "reasoning", "tool_calls", "invalid_tool_calls", "metadata"} | null,
        "tokens": {"input_tokens", "output_tokens", "total_tokens", ...} | null,
        "latency_s": float | null, "error": str | null,
        "cached": bool},              # answered by the model cache (--model-cache), no provider called
       {"kind": "tool", "step": str,
        "call": <the tool call's record, as in results.jsonl: {"turn", "round", "id", "name", "args", "ok",
                 "output", "images": [{"name", "ref", "size", "region"}], "duration_s", "error"}>},
       {"kind": "step", "step": str, "turn": int | null, "text": str | null, "data": {...},
        "images": [{"name", "ref", "size"}], "image_op": str | null},
       {"kind": "judge", "step": "judge", "index": int, "rubric": str, "prompt": str | null,
        "verdict": <the rubric's verdict, as in results.jsonl: {"rubric_id", "turn", "weight", "critical",
                    "critical_flag", "status", "justification", "judge", "cached", "model_call"}>,
        "calls": [<model call: the fields of a model event without kind/step/turn>]}
     ]}

One record per fact: a tool event carries the tool call's :class:`~vtb_agents.results.ToolCallRecord`
and a judge event the rubric's :class:`~vtb_agents.results.RubricVerdict`, the very records of the
task's line in ``results.jsonl`` (the episode driver hands the turn's records to the recorder, which
puts them in its events: :meth:`~vtb_agents.episodes.recorder.TranscriptRecorder.adopt`); the event
adds only where it happened (its step) and, for a verdict, the rubric's text, the judge prompt and the
judge's model calls.

``step`` names the node or strategy step that made the event: ``model`` and ``round_cap`` (the tool
loop), ``zoom.propose`` / ``zoom.refine`` / ``zoom.views`` (zoom), ``marks``, ``plan``,
``critique`` and ``judge``; a user's agent's own nodes keep their names (``model`` for
``create_agent``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from vtb_agents.results import RubricVerdict, SavedImage, TokenUsage, ToolCallRecord

__all__ = ["JUDGE_EVENT", "JUDGING_STEP", "STEP_EVENT", "STEP_METADATA_KEY", "TRANSCRIPT_FORMAT", "CacheCounts",
           "Event", "ImageRef", "JudgeEvent", "ModelCall", "ModelEvent", "ModelResponse", "StepEvent", "ToolEvent",
           "Transcript", "image_refs"]

TRANSCRIPT_FORMAT = 1
"""The format version of a transcript file that this vtb writes and reads (its ``format_version``;
checked by :mod:`vtb_agents.rundir.transcripts` before anything else of the file is read)."""
STEP_EVENT = "vtb_step"
"""Name of the LangChain custom event a strategy dispatches with a :class:`StepEvent`."""
JUDGE_EVENT = "vtb_judge"
"""Name of the LangChain custom event the grading graph dispatches with a :class:`JudgeEvent`."""
STEP_METADATA_KEY = "vtb_step"
"""Run metadata naming the step of a model call (``zoom.propose``, ``plan``...; default: the LangGraph node)."""
JUDGING_STEP = "judge"
"""``vtb_step`` of the grading graph's runs: model calls under it are judge calls, not episode events."""


class ImageRef(BaseModel):
    """An image by the sha256 of its bytes (stored in ``artifacts/``)."""

    sha256: str


class ModelResponse(BaseModel):
    """A model's reply as it came: its text, raw content (blocks, reasoning blocks included), the
    reasoning text the provider returned, the tool calls (valid and invalid) and its metadata."""

    text: str = ""
    content: Any = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    invalid_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelCall(BaseModel):
    """One request to a chat model and what came of it (a reply, or an error); ``cached``: the run's
    model cache answered it (``--model-cache``), no provider was called."""

    model: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    images: list[ImageRef] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    response: ModelResponse | None = None
    tokens: TokenUsage | None = None
    latency_s: float | None = None
    error: str | None = None
    cached: bool = False


class ModelEvent(ModelCall):
    """A model call of the episode, made by ``step`` in ``turn`` (0-based)."""

    kind: Literal["model"] = "model"
    step: str
    turn: int | None = None


class ToolEvent(BaseModel):
    """A tool call, where it happened (``step``: the node that ran it): its record is ``call``, the
    result's own :class:`~vtb_agents.results.ToolCallRecord` (arguments, output, saved images,
    duration, error)."""

    kind: Literal["tool"] = "tool"
    step: str
    call: ToolCallRecord

    @property
    def turn(self) -> int | None:
        """The turn (0-based) of the call."""
        return self.call.turn


class StepEvent(BaseModel):
    """A strategy step's own artefacts: a plan or critique (``text``), zoom proposals and boxes
    (``data``), the views or marked images it made (``images``; ``image_op`` says which operation
    made them, ``crop`` or ``mark``, counted as ``strategy_image_ops`` in the summary)."""

    kind: Literal["step"] = "step"
    step: str
    turn: int | None = None
    text: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    images: list[SavedImage] = Field(default_factory=list)
    image_op: str | None = None


class JudgeEvent(BaseModel):
    """The verdict on one rubric (``index``: its position among the task's rubrics): ``verdict`` is the
    result's own :class:`~vtb_agents.results.RubricVerdict` (who decided it, the status, the
    justification, whether it came from the verdict cache); the event adds the rubric's text, the judge
    prompt and the judge's model calls (none when cached or decided without a model)."""

    kind: Literal["judge"] = "judge"
    step: str = "judge"
    index: int
    rubric: str
    prompt: str | None = None
    verdict: RubricVerdict
    calls: list[ModelCall] = Field(default_factory=list)

    @property
    def turn(self) -> int:
        """The turn (0-based) whose answer the verdict judges."""
        return self.verdict.turn


Event = Annotated[ModelEvent | ToolEvent | StepEvent | JudgeEvent, Field(discriminator="kind")]


class Transcript(BaseModel):
    """One task's transcript (one epoch of it): ``{"format_version", "task_id", "events"}``."""

    format_version: int = TRANSCRIPT_FORMAT
    """The format of this transcript (:data:`TRANSCRIPT_FORMAT` when this vtb wrote it)."""
    task_id: str
    events: list[Event] = Field(default_factory=list)

    def of_kind(self, kind: str) -> list[Event]:
        """The events of one ``kind`` (``model``, ``tool``, ``step``, ``judge``), in order."""
        return [event for event in self.events if event.kind == kind]

    def cache_counts(self) -> CacheCounts:
        """How many of the task's calls the caches answered (:class:`CacheCounts`)."""
        judged = [event for event in self.events if isinstance(event, JudgeEvent)]
        model = [event for event in self.events if isinstance(event, ModelEvent)]
        judge_calls = [call for event in judged for call in event.calls]
        return CacheCounts(model_calls=len(model), model_cached=sum(e.cached for e in model),
                           judge_calls=len(judge_calls), judge_calls_cached=sum(c.cached for c in judge_calls),
                           verdicts=len(judged), verdicts_cached=sum(e.verdict.cached for e in judged))


class CacheCounts(BaseModel):
    """A task's calls answered from a cache: its model calls and the LLM judge's calls answered by the
    model cache (``--model-cache``), and its verdicts taken from the verdict cache (judge cache)."""

    model_calls: int = 0
    model_cached: int = 0
    judge_calls: int = 0
    judge_calls_cached: int = 0
    verdicts: int = 0
    verdicts_cached: int = 0

    def text(self) -> str:
        """One line: ``model cache: 3 of 3 model calls, 0 of 2 judge calls; verdict cache: 1 of 4 verdicts``."""
        return (f"model cache: {self.model_cached} of {self.model_calls} model call(s), {self.judge_calls_cached} of "
                f"{self.judge_calls} judge call(s); verdict cache: {self.verdicts_cached} of {self.verdicts} "
                "verdict(s)")


def image_refs(value: Any) -> list[str]:
    """The sha256 of every ``{"sha256"}`` image reference inside a recorded message's content (a block,
    a list of blocks, nested), in order: how a reader finds the images of a message."""
    if isinstance(value, dict):
        if set(value) == {"sha256"} and isinstance(value["sha256"], str):
            return [value["sha256"]]
        return [ref for item in value.values() for ref in image_refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in image_refs(item)]
    return []
