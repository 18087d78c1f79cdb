"""Per-thread sandboxes and artifact folders of the Studio graphs, kept by the server process.

A LangGraph thread is one conversation (or one task); all its runs (each turn, the resume after an
interrupt) must meet the same sandbox, with the files and Python variables earlier runs left there.
A live sandbox cannot be checkpointed, so the server process keeps one per thread:

- The thread's images live in ``<root>/<thread id>/artifacts`` (root: ``$VTB_STUDIO_DIR``, default
  ``<system temp>/vtb-studio``), which outlives the process, as the thread's checkpoints do.
- Its sandbox is opened by the thread's first run and kept for the next ones. At most
  :data:`MAX_OPEN_SANDBOXES` are open at once: opening one more closes the least recently used
  idle one.
- A thread whose sandbox is gone (closed that way, or the server restarted) gets a new sandbox
  holding every image its conversation refers to, under the same names; Python variables of the
  old one are lost.
- Every sandbox still open is closed when the process exits.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.tasks.local import safe_dirname

if TYPE_CHECKING:
    from vtb_agents.runner.plan import SandboxOpener

MAX_OPEN_SANDBOXES = 8
STUDIO_DIR_ENV = "VTB_STUDIO_DIR"

ImageFile = tuple[str, str]
"""An image of a thread: (file name in the sandbox, artifact reference)."""


def studio_root() -> Path:
    """Where the Studio graphs keep per-thread artifacts: ``$VTB_STUDIO_DIR`` or ``<tmp>/vtb-studio``."""
    return Path(os.environ.get(STUDIO_DIR_ENV) or Path(tempfile.gettempdir()) / "vtb-studio")


def thread_artifacts(thread_id: str) -> ArtifactStore:
    """The artifact store of ``thread_id`` (its folder under :func:`studio_root`)."""
    return ArtifactStore(studio_root() / safe_dirname(thread_id) / "artifacts")


@dataclass
class Session:
    """A thread's sandbox and artifact store; ``busy`` counts the runs using it right now."""

    thread_id: str
    kind: str
    sandbox: Sandbox
    artifacts: ArtifactStore
    stack: ExitStack = field(repr=False)
    busy: int = 0


class SessionRegistry:
    """The open sessions of this process, by thread id, least recently used first."""

    def __init__(self, max_open: int = MAX_OPEN_SANDBOXES) -> None:
        self.max_open = max_open
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def use(self, thread_id: str, kind: str, opener: SandboxOpener,
            images: Iterable[ImageFile] = ()) -> Iterator[Session]:
        """The session of ``thread_id`` for the length of a run, opened with ``opener`` (a sandbox of
        ``kind``, from the run's plan) holding ``images`` if missing."""
        with self._lock:
            session = self._sessions.get(thread_id)
            if session is not None and session.kind != kind:  # the thread's context changed sandbox kind
                self._close(thread_id)
                session = None
            if session is None:
                self._make_room()
                session = self._open(thread_id, kind, opener, images)
            self._sessions.move_to_end(thread_id)
            session.busy += 1
        try:
            yield session
        finally:
            with self._lock:
                session.busy -= 1

    def discard(self, thread_id: str) -> None:
        """Close ``thread_id``'s sandbox if it has one (a new task on the thread starts afresh)."""
        with self._lock:
            session = self._sessions.get(thread_id)
            if session is not None and session.busy == 0:
                self._close(thread_id)

    def close_all(self) -> None:
        """Close every open sandbox (at process exit)."""
        with self._lock:
            for thread_id in list(self._sessions):
                self._close(thread_id)

    def _open(self, thread_id: str, kind: str, opener: SandboxOpener, images: Iterable[ImageFile]) -> Session:
        stack = ExitStack()
        try:
            sandbox = stack.enter_context(opener())
            artifacts = thread_artifacts(thread_id)
            for name, ref in dict(images).items():
                sandbox.put_file(name, artifacts.get(ref))
        except BaseException:
            stack.close()
            raise
        session = Session(thread_id=thread_id, kind=kind, sandbox=sandbox, artifacts=artifacts, stack=stack)
        self._sessions[thread_id] = session
        return session

    def _make_room(self) -> None:
        idle = [t for t, s in self._sessions.items() if s.busy == 0]
        while len(self._sessions) >= self.max_open and idle:
            self._close(idle.pop(0))

    def _close(self, thread_id: str) -> None:
        self._sessions.pop(thread_id).stack.close()


SESSIONS = SessionRegistry()
atexit.register(SESSIONS.close_all)
