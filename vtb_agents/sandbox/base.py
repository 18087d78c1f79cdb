"""The sandbox contract: where model-written code runs, one sandbox per episode.

A sandbox owns one working directory (the DESIGN.md contract: task images as
``image_{i}.png``, results as ``transformed_image_{i}.png``) and keeps Python state across
``run`` calls, like a Jupyter kernel. This module holds only the contract every backend shares
(the protocol, its result, its error, the defaults); each backend lives beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S

OUTPUT_CAP_CHARS = 20_000
"""stdout and stderr are each cut to this many characters (a note says how much was cut)."""
STATE_RESET = "the Python state was reset (variables and imports lost)"
"""What an error adds when a backend had to restart its interpreter."""


class SandboxError(RuntimeError):
    """The sandbox itself failed (worker would not start, isolation unavailable, or closed)."""

    passes_tool_guard = True  # not the code's failure: the episode ends (tools/guard.py)


@dataclass
class ExecResult:
    """Outcome of one ``Sandbox.run`` call.

    ``ok`` is False when the code raised, timed out or killed its worker; ``error`` then says
    what happened in one line (exception type and message, or ``timeout after 30 s``).
    ``new_files`` lists files created or modified in the working directory by this call.
    """

    ok: bool
    stdout: str = ""
    stderr: str = ""
    new_files: list[str] = field(default_factory=list)
    error: str | None = None
    duration_s: float = 0.0
    state_lost: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of all fields."""
        return asdict(self)


@runtime_checkable
class Sandbox(Protocol):
    """What every sandbox backend offers (local worker process, E2B, your own class).

    A backend is built as ``Class(workdir, **options)``. ``workdir`` is ``None`` in a run (every
    episode's sandbox, the pre-run canary, :func:`vtb_agents.task_tools`, ``vtb sandbox exec``
    without ``--workdir``): the sandbox then makes its own working directory, keeps it as
    ``workdir`` (a ``Path``) and removes it on ``close``; a given ``Path`` (``vtb sandbox exec
    --workdir``) is used, created if missing, and kept. ``options`` are only those the run's flags
    set: ``strict=True`` (``--sandbox-strict``: refuse to run without full isolation) and
    ``network=True`` (``--sandbox-network``). ``isolation`` names the confinement reached. Code
    cells expect PIL (Pillow), NumPy and OpenCV (``cv2``) importable, as the vision tool's
    description promises; a run checks all of this once before its first task
    (docs/how-to/doctor.md).
    """

    workdir: Path
    isolation: str

    def run(self, code: str, timeout: float = DEFAULT_CODE_TIMEOUT_S) -> ExecResult:
        """Execute ``code`` in the persistent interpreter and report what happened."""
        ...

    def put_file(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` (relative to the working directory)."""
        ...

    def get_file(self, name: str) -> bytes:
        """Read ``name`` (relative to the working directory)."""
        ...

    def list_files(self) -> list[str]:
        """Names of the files in the working directory, sorted."""
        ...

    def close(self) -> None:
        """Stop the interpreter and free its resources; safe to call twice."""
        ...


PROTOCOL_MEMBERS = ("workdir", "isolation", "run", "put_file", "get_file", "list_files", "close")
"""The attributes and methods of :class:`Sandbox`, as errors list what a backend lacks."""


def missing_members(sandbox: object) -> list[str]:
    """The members of the :class:`Sandbox` protocol that ``sandbox`` lacks (empty: it has them all)."""
    return [name for name in PROTOCOL_MEMBERS if not hasattr(sandbox, name)]


def sandbox_settings(sandbox: Sandbox) -> dict[str, str]:
    """How ``sandbox`` confines code, for an episode's recorded settings."""
    return {"sandbox_isolation": str(getattr(sandbox, "isolation", "unknown")),
            "sandbox_memory_cap": str(getattr(sandbox, "memory_cap", "unknown")),
            "sandbox_syscall_filter": str(getattr(sandbox, "syscall_filter", "unknown")),
            "sandbox_network": str(getattr(sandbox, "network", "unknown"))}
