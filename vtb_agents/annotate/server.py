"""The ``vtb annotate`` server: a local page (127.0.0.1 only, no external assets) for labelling a
run's rubrics by hand, built on the standard library's ``http.server``.

Routes: ``GET /`` the page; ``GET /api/state`` the run's tasks, answers and rubrics (no judge
verdicts: the labeller must not be anchored by them) with the labels so far, and per turn the strategy
steps and tool calls of the task's transcript as HTML, rendered by the task pages' own function
(:func:`~vtb_agents.report.events_html.event_html`, everything escaped there); ``GET /image/task/T/I``
and ``GET /image/ref/SHA`` the task's images and the images its tool calls made; ``POST /api/label``
``{"task_id", "turn", "rubric_id", "label", "note"}`` saves one label at once (:class:`LabelStore`):
``turn`` an integer (1-based; ``true`` is no turn), ``note`` at most :data:`MAX_NOTE_CHARS` characters,
the body at most :data:`MAX_BODY_BYTES` (413 beyond, unread); anything else is a 400 naming the field.
Every request must name the server by its own host name, and a label must come from the served page
(JSON, same origin, the page's session token): see :mod:`vtb_agents.annotate.guard`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from vtb_agents.annotate.guard import Refusal, RequestGuard
from vtb_agents.annotate.labels import LabelStore
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.report.events_html import ModelCalls, event_html
from vtb_agents.report.images import ImageLink
from vtb_agents.results import TaskResult
from vtb_agents.rundir.read import TaskSource, open_finished_run
from vtb_agents.rundir.transcripts import find_transcript
from vtb_agents.tasks.model import Task
from vtb_agents.transcript import StepEvent, ToolEvent, Transcript

HOST = "127.0.0.1"
MAX_NOTE_CHARS = 10_000
"""Longest note a label keeps: a few paragraphs of reasoning; the labels file stays readable at any size of run."""
MAX_BODY_BYTES = 256 * 1024
"""Largest label request read: a note of MAX_NOTE_CHARS characters, each JSON-escaped (12 bytes at most), fits."""
_MIME = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
         (b"RIFF", "image/webp"), (b"BM", "image/bmp"))


def image_mime(data: bytes) -> str:
    """The content type of encoded image bytes (by their magic number)."""
    return next((mime for magic, mime in _MIME if data.startswith(magic)), "application/octet-stream")


@dataclass(frozen=True)
class ServedImages:
    """The annotate server's images of a transcript (:class:`~vtb_agents.report.events_html.ImageSource`):
    each artifact at ``image/ref/SHA`` (thumbnail and full size alike), or why there is none."""

    artifacts: ArtifactStore

    def from_ref(self, ref: str, name: str) -> ImageLink:
        """The route of artifact ``ref``."""
        try:
            found = self.artifacts.path(ref).exists()
        except ValueError:
            return ImageLink(name, problem=f"bad artifact reference {ref!r}")
        if not found:
            return ImageLink(name, problem="artifact missing from the run directory")
        return ImageLink(name, thumb=f"image/ref/{ref}", full=f"image/ref/{ref}")


def steps_html(transcript: Transcript | None, turn: int, images: ServedImages) -> str:
    """The strategy steps and tool calls of ``turn`` in ``transcript``, rendered as on the task pages
    (:func:`~vtb_agents.report.events_html.event_html`); no verdicts (the labeller must not see them)."""
    if transcript is None:
        return ""
    calls = ModelCalls()
    return "".join(event_html(event, images, calls, base="/") for event in transcript.events
                   if isinstance(event, StepEvent | ToolEvent) and event.turn == turn)


def _turn_view(task_index: int, task: Task, result: TaskResult, turn: int, transcript: Transcript | None,
               images: ServedImages) -> dict[str, Any]:
    record = next((t for t in result.episode.turns if t.index == turn), None)
    spec = task.turns[turn]
    answer = record.answer if record else f"(no answer: the episode ended with status {result.episode.status}"\
        f"{': ' + result.episode.error if result.episode.error else ''})"
    return {
        "turn": turn + 1, "prompt": spec.prompt, "golden_answer": spec.golden_answer, "answer": answer,
        "images": [f"/image/task/{task_index}/{i}" for i in spec.images if 0 <= i < len(task.images)],
        "transformed": [] if transcript is not None else [
            f"/image/ref/{img.ref}" for call in (record.tool_calls if record else []) for img in call.images],
        "steps": steps_html(transcript, turn, images),
        "rubrics": [{"rubric_id": r.id, "description": r.description, "weight": r.weight,
                     "critical": r.is_critical(), "objectivity": r.objectivity, "explicitness": r.explicitness}
                    for r in spec.rubrics],
    }


@dataclass
class AnnotationSession:
    """A run opened for labelling: its results, tasks, artifacts and labels file."""

    run_dir: Path
    results: list[TaskResult]
    tasks: dict[str, Task]
    artifacts: ArtifactStore
    labels: LabelStore

    @classmethod
    def open(cls, run_dir: Path | str, labels_path: Path | str, tasks: TaskSource | None = None) -> AnnotationSession:
        """Open ``run_dir`` (a finished run) and the labels file (created on the first label)."""
        finished = open_finished_run(run_dir).single_epoch("vtb annotate")
        by_id = finished.tasks(tasks, needed=[r.task_id for r in finished.results])
        return cls(Path(run_dir), finished.results, by_id, ArtifactStore(Path(run_dir) / "artifacts"),
                   LabelStore(Path(labels_path)))

    def state(self) -> dict[str, Any]:
        """Everything the page shows, and the labels so far."""
        views: list[dict[str, Any]] = []
        images = ServedImages(self.artifacts)
        for index, result in enumerate(self.results):
            task = self.tasks[result.task_id]
            transcript = find_transcript(self.run_dir, result.task_id, result.epoch)
            views.append({"task_id": task.id, "category": task.category, "domain": task.domain,
                          "turns": [_turn_view(index, task, result, t, transcript, images)
                                    for t in range(len(task.turns))]})
        total = sum(len(turn["rubrics"]) for view in views for turn in view["turns"])
        return {"run": str(self.run_dir), "labels_file": str(self.labels.path), "total": total,
                "tasks": views, "labels": self.labels.rows(), "max_note_chars": MAX_NOTE_CHARS}

    def image(self, parts: list[str]) -> bytes:
        """Bytes of ``task/T/I`` (task T's image I) or ``ref/SHA`` (an artifact); KeyError if none."""
        if len(parts) == 3 and parts[0] == "task" and parts[1].isdigit() and parts[2].isdigit():
            result = self.results[int(parts[1])] if int(parts[1]) < len(self.results) else None
            task = self.tasks[result.task_id] if result else None
            if task is not None and int(parts[2]) < len(task.images):
                return task.images[int(parts[2])].read_bytes()
        if len(parts) == 2 and parts[0] == "ref":
            try:
                return self.artifacts.get(parts[1])
            except (ValueError, OSError):
                pass
        raise KeyError("/".join(parts))

    def label(self, body: Any) -> dict[str, Any]:
        """Save one label from a request body; ValueError names what is wrong with it."""
        if not isinstance(body, dict):
            raise ValueError("expected a JSON object")
        task_id, turn, rubric_id = body.get("task_id"), body.get("turn"), body.get("rubric_id")
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task_id not in {r.task_id for r in self.results}:
            raise ValueError(f"unknown task {task_id!r}")
        if isinstance(turn, bool) or not isinstance(turn, int):  # a bool is an int to Python, not to a labeller
            raise ValueError(f"'turn' must be an integer (1-based), not {json.dumps(turn)}")
        if not 1 <= turn <= len(task.turns):
            raise ValueError(f"task {task_id!r} has no turn {turn!r}")
        if rubric_id not in {r.id for r in task.turns[turn - 1].rubrics}:
            raise ValueError(f"task {task_id!r} turn {turn} has no rubric {rubric_id!r}")
        note = body.get("note", "")
        if not isinstance(note, str):
            raise ValueError("'note' must be a string")
        if len(note) > MAX_NOTE_CHARS:
            raise ValueError(f"'note' has {len(note):,} characters; a note keeps at most {MAX_NOTE_CHARS:,}")
        row = self.labels.set(task_id, turn, rubric_id, str(body.get("label")), note)
        return {"saved": row, "labelled": len(self.labels.rows())}


TOKEN_SLOT = b"{{token}}"


def _page(token: str) -> bytes:
    """The labelling page, carrying the session token its writes must send."""
    page = resources.files("vtb_agents.annotate").joinpath("templates/annotate.html").read_bytes()
    return page.replace(TOKEN_SLOT, token.encode())


class GuardedServer(ThreadingHTTPServer):
    """A threading HTTP server with the :class:`RequestGuard` of the port it bound (port 0 picks one)
    and the session ``token``."""

    guard: RequestGuard

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], token: str) -> None:
        self.token = token
        super().__init__(address, handler)

    def server_bind(self) -> None:
        """Bind, then make the guard for the port actually bound."""
        super().server_bind()
        self.guard = RequestGuard(self.server_address[1], self.token)


def make_server(session: AnnotationSession, port: int = 0) -> GuardedServer:
    """An HTTP server for ``session`` on 127.0.0.1 (``port`` 0: a free one); call ``serve_forever``.
    It answers only requests that pass its :class:`RequestGuard` (``server.guard``)."""
    token = secrets.token_urlsafe(32)
    page = _page(token)

    class Handler(BaseHTTPRequestHandler):
        server: GuardedServer

        def log_message(self, *args: Any) -> None:  # the terminal shows the URL, not every request
            pass

        def _send(self, status: int, data: bytes, mime: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", mime)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload, ensure_ascii=False).encode(), "application/json")

        def _refused(self, refusal: Refusal | None) -> bool:
            if refusal is not None:
                self._json(refusal.status, {"error": refusal.error})
            return refusal is not None

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if self._refused(self.server.guard.check_host(self.headers)):
                return
            path = self.path.split("?", 1)[0]
            if path == "/":
                self._send(200, page, "text/html; charset=utf-8")
            elif path == "/api/state":
                self._json(200, session.state())
            elif path.startswith("/image/"):
                try:
                    data = session.image(path.removeprefix("/image/").split("/"))
                except KeyError:
                    self._json(404, {"error": f"no image {path}"})
                    return
                self._send(200, data, image_mime(data))
            else:
                self._json(404, {"error": f"no route {path}"})

        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            guard = self.server.guard
            if self._refused(guard.check_host(self.headers) or guard.check_write(self.headers)):
                return
            if self.path != "/api/label":
                self._json(404, {"error": f"no route {self.path}"})
                return
            size = self.headers.get("Content-Length") or "0"
            if not size.isdigit():
                self._json(400, {"error": f"bad Content-Length {size!r}"})
                return
            if int(size) > MAX_BODY_BYTES:
                self.close_connection = True  # the body is left unread
                self._json(413, {"error": f"a label request has at most {MAX_BODY_BYTES:,} bytes, not {int(size):,}"})
                return
            try:
                body = json.loads(self.rfile.read(int(size)) or b"null")
                self._json(200, session.label(body))
            except ValueError as exc:  # bad JSON or a label that names nothing in the run
                self._json(400, {"error": str(exc)})

    return GuardedServer((HOST, port), Handler, token)
