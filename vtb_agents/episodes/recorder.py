"""The one recorder of a task's transcript: a LangChain callback handler the episode driver installs.

Why a callback handler: LangChain hands a run's callbacks down to every nested runnable, so one
handler in the episode's config sees every model call and tool call of every kind of agent (our
strategies, a user's own ``agent:`` graph, the LLM judge), whoever wrote the loop, and sees the
messages exactly as the chat model receives them (after a middleware has rewritten them, and
with the images materialised and downscaled). A model cache that answers without calling the
provider still goes through the model's callbacks, so cached replies are recorded too.

- ``on_chat_model_start`` / ``on_llm_end`` / ``on_llm_error``: a model event (``cached`` when the model
  cache answered it: the reply carries its cache key in ``response_metadata``). The messages go
  through :func:`~vtb_agents.models.wire.wire_request`: every base64 image becomes
  ``{"sha256"}`` of its decoded bytes (the bytes sent), stored once in the run's artifact store.
- ``on_tool_start`` / ``on_tool_end`` / ``on_tool_error``: a tool event (outermost tool runs only:
  a wrapper tool running its inner tool is one call), holding a :class:`~vtb_agents.results.ToolCallRecord`
  until the driver hands over the turn's own records (:meth:`TranscriptRecorder.adopt`): the event then
  carries the very record of the result, with the duration and error the recorder measured.
- ``on_custom_event``: a strategy's own step (:data:`~vtb_agents.transcript.STEP_EVENT`, a
  :class:`~vtb_agents.transcript.StepEvent`) or a rubric's verdict from the grading graph
  (:data:`~vtb_agents.transcript.JUDGE_EVENT`, a :class:`~vtb_agents.transcript.JudgeEvent`), to
  which the judge model calls made under the same grading node are attached.

Each event's ``step`` is the run metadata's ``vtb_step`` (set by a strategy for its own model
calls, :data:`~vtb_agents.transcript.STEP_METADATA_KEY`), else the LangGraph node that made it; ``turn`` is the run
metadata's ``vtb_turn``, which the driver sets per turn.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any, Sequence
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.models.usage import CACHE_HIT_METADATA_KEY, TURN_METADATA_KEY, usage_of
from vtb_agents.models.wire import WireImage, wire_request
from vtb_agents.results import SavedImage, ToolCallRecord
from vtb_agents.transcript import (JUDGE_EVENT, JUDGING_STEP, STEP_EVENT, STEP_METADATA_KEY, Event, ImageRef,
                                   JudgeEvent, ModelCall, ModelEvent, ModelResponse, StepEvent, ToolEvent, Transcript)



UNFINISHED = "unfinished: the episode ended before this call did (a time limit, or an error elsewhere)"
"""The ``error`` of a call the transcript saw start and never end."""


def plain(value: Any) -> Any:
    """``value`` as plain JSON data (what JSON cannot hold becomes its ``str``)."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def reasoning_text(message: AIMessage) -> str | None:
    """The reasoning text a reply carries: standard ``reasoning`` blocks (LangChain's normalised
    form of OpenAI and Anthropic reasoning), or ``reasoning_content`` as OpenAI-compatible servers send it."""
    parts = [str(block.get("reasoning") or "") for block in message.content_blocks if block.get("type") == "reasoning"]
    extra = message.additional_kwargs.get("reasoning_content")
    if isinstance(extra, str):
        parts.append(extra)
    text = "\n".join(p for p in parts if p)
    return text or None


def tool_images(artifact: Any) -> list[SavedImage]:
    """The images a tool result's artifact lists (``{"name", "ref", "size", "region"}``)."""
    images = artifact.get("images", []) if isinstance(artifact, dict) else []
    return [SavedImage.model_validate(i) for i in images
            if isinstance(i, dict) and isinstance(i.get("ref"), str) and isinstance(i.get("name"), str)]


def error_line(error: BaseException) -> str:
    """An error as one line: its type and message."""
    return f"{type(error).__name__}: {error}"


def _unfinished(event: Event) -> Event:
    """A copy of a call the episode's end cut off, saying so in its ``error`` (one it had stays)."""
    if isinstance(event, ToolEvent):
        return event.model_copy(update={"call": event.call.model_copy(
            update={"error": event.call.error or UNFINISHED, "ok": False})})
    if isinstance(event, ModelEvent):
        return event.model_copy(update={"error": event.error or UNFINISHED})
    return event


class TranscriptRecorder(BaseCallbackHandler):
    """Records one task's events (thread-safe); :meth:`transcript` gives them as a record.

    Pass it in the ``callbacks`` of the episode's config (the driver does) and of the grading
    run's (:func:`~vtb_agents.judges.graph.grade_episode`).
    """

    run_inline = True  # events are recorded in the order they happen

    def __init__(self, artifacts: ArtifactStore) -> None:
        super().__init__()
        self.artifacts = artifacts
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._judged: list[JudgeEvent] = []
        self._pending: dict[UUID, tuple[ModelCall | ToolEvent, float]] = {}  # started, not ended: since when
        self._judge_calls: dict[UUID, ModelCall] = {}
        self._parents: dict[UUID, UUID | None] = {}
        self._stored: set[str] = set()
        self._known: dict[str, WireImage] = {}  # images by their base64 text: each decoded and hashed once

    # -- the record -----------------------------------------------------------------------------

    def transcript(self, task_id: str) -> Transcript:
        """The events so far: the episode's in order, then the rubric verdicts in rubric order. A
        call still open (one whose end a time limit cut off) says so in its ``error``."""
        with self._lock:
            judged = sorted(self._judged, key=lambda event: event.index)
            open_calls = {id(event) for event, _ in self._pending.values()}
            events = [_unfinished(event) if id(event) in open_calls else event for event in self._events]
            return Transcript(task_id=task_id, events=[*events, *judged])

    def adopt(self, calls: Sequence[ToolCallRecord]) -> None:
        """Make the tool events of ``calls`` (a turn's records, by call id and turn) carry those very
        records: one record of each call, in the result and in the transcript. A record takes the
        duration the recorder measured when the tool did not report one, and the error it saw."""
        by_key = {(call.id, call.turn): call for call in calls if call.id}
        with self._lock:
            for event in self._events:
                if not isinstance(event, ToolEvent):
                    continue
                record = by_key.get((event.call.id, event.call.turn))
                if record is None or record is event.call:
                    continue
                if record.duration_s is None:
                    record.duration_s = event.call.duration_s
                if record.error is None:
                    record.error = event.call.error
                event.call = record

    def strategy_image_ops(self) -> dict[str, int]:
        """Images the strategy's own steps made, by operation (``crop``, ``mark``)."""
        with self._lock:
            ops: Counter[str] = Counter()
            for event in self._events:
                if isinstance(event, StepEvent) and event.image_op:
                    ops[event.image_op] += len(event.images)
            return dict(sorted(ops.items()))

    # -- runs and their parents -----------------------------------------------------------------

    def _run(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id

    def _finish(self, run_id: UUID) -> ModelCall | ToolEvent | None:
        """The call ``run_id`` started, now ended, with how long it took (the caller holds the lock)."""
        found = self._pending.pop(run_id, None)
        if found is None:
            return None
        event, started = found
        elapsed = round(time.perf_counter() - started, 4)
        if isinstance(event, ToolEvent):
            event.call.duration_s = elapsed
        else:
            event.latency_s = elapsed
        return event

    def _failed(self, run_id: UUID, error: BaseException) -> None:
        with self._lock:
            event = self._finish(run_id)
            if isinstance(event, ToolEvent):
                event.call.error, event.call.ok = error_line(error), False
            elif event is not None:
                event.error = error_line(error)

    def _ancestors(self, run_id: UUID | None) -> list[UUID]:
        chain: list[UUID] = []
        while run_id is not None and run_id not in chain:
            chain.append(run_id)
            run_id = self._parents.get(run_id)
        return chain

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._run(run_id, parent_run_id)

    # -- model calls ----------------------------------------------------------------------------

    def _store(self, images: Sequence[WireImage]) -> list[ImageRef]:
        refs = []
        for image in images:
            if image.sha256 not in self._stored:
                self.artifacts.put(image.data)  # content-addressed: the reference is the same sha256
                self._stored.add(image.sha256)
            refs.append(ImageRef(sha256=image.sha256))
        return refs

    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[BaseMessage]], *,
                            run_id: UUID, parent_run_id: UUID | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Start a model event: the request as sent, its images stored once, its parameters."""
        with self._lock:
            request = wire_request(messages[0] if messages else [], self._known)
        params = plain(kwargs.get("invocation_params") or {})
        meta = metadata or {}
        step = str(meta.get(STEP_METADATA_KEY) or meta.get("langgraph_node") or "model")
        with self._lock:
            self._parents[run_id] = parent_run_id
            images = self._store(request.images)
            fields = {"model": params.get("model") or params.get("model_name"), "messages": request.messages,
                      "images": images, "params": params}
            turn = meta.get(TURN_METADATA_KEY)
            call: ModelCall
            if step == JUDGING_STEP:  # attached to its rubric's verdict when that arrives
                call = self._judge_calls[run_id] = ModelCall(**fields)
            else:
                call = ModelEvent(step=step, turn=turn if isinstance(turn, int) else None, **fields)
                self._events.append(call)
            self._pending[run_id] = (call, time.perf_counter())

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Finish the model event: the reply (text, content, reasoning, tool calls), tokens, latency."""
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        with self._lock:
            call = self._finish(run_id)
            if isinstance(call, ModelCall) and isinstance(message, AIMessage):
                content = wire_request([message], self._known)
                call.response = ModelResponse(
                    text=message.text, content=plain(content.messages[0]["content"]), reasoning=reasoning_text(message),
                    tool_calls=plain(message.tool_calls), invalid_tool_calls=plain(message.invalid_tool_calls),
                    metadata=plain(message.response_metadata))
                self._store(content.images)
                call.tokens = usage_of(message)
                call.cached = CACHE_HIT_METADATA_KEY in message.response_metadata

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Finish the model event with the error (the attempt failed)."""
        self._failed(run_id, error)

    # -- tool calls -----------------------------------------------------------------------------

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Start a tool event (unless a tool run encloses this one: a wrapper's inner call)."""
        meta = metadata or {}
        with self._lock:
            self._parents[run_id] = parent_run_id
            running_tools = {rid for rid, (event, _) in self._pending.items() if isinstance(event, ToolEvent)}
            if running_tools.intersection(self._ancestors(parent_run_id)):
                return
            if meta.get(STEP_METADATA_KEY) == JUDGING_STEP:
                return
            turn = meta.get(TURN_METADATA_KEY)
            name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
            call_id = kwargs.get("tool_call_id")
            event = ToolEvent(step=str(meta.get("langgraph_node") or "tools"), call=ToolCallRecord(
                turn=turn if isinstance(turn, int) else None, id=call_id if isinstance(call_id, str) else "",
                name=name, args=plain(inputs if inputs is not None else input_str), ok=True))
            self._events.append(event)
            self._pending[run_id] = (event, time.perf_counter())

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Finish the tool event: its output, saved images, duration, and error status."""
        with self._lock:
            event = self._finish(run_id)
            if not isinstance(event, ToolEvent):
                return
            call = event.call
            if isinstance(output, ToolMessage):
                call.output = output.text
                call.images = tool_images(output.artifact)
                artifact = output.artifact if isinstance(output.artifact, dict) else {}
                if output.status == "error" or artifact.get("ok") is False:
                    call.error, call.ok = output.text or "error", False
                call.id = call.id or output.tool_call_id or ""
            else:
                call.output = output if isinstance(output, str) else json.dumps(plain(output), ensure_ascii=False)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Finish the tool event with the error the tool raised."""
        self._failed(run_id, error)

    # -- strategy steps and verdicts ------------------------------------------------------------

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, metadata: dict[str, Any] | None = None,
                        **kwargs: Any) -> None:
        """A strategy step (``vtb_step``) or a rubric verdict (``vtb_judge``) with its judge's calls."""
        if name == STEP_EVENT and isinstance(data, StepEvent):
            turn = (metadata or {}).get(TURN_METADATA_KEY)
            step = data.model_copy(update={"turn": turn if isinstance(turn, int) else data.turn})
            with self._lock:
                self._events.append(step)
        elif name == JUDGE_EVENT and isinstance(data, JudgeEvent):
            with self._lock:
                mine = [rid for rid in self._judge_calls if run_id in self._ancestors(rid)]
                calls = [self._judge_calls.pop(rid) for rid in mine]
                self._judged.append(data.model_copy(update={"calls": [*data.calls, *calls]}))
