"""Sandboxes where model-written code runs: ``open_sandbox("local")`` gives one per episode."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import DEFAULT_TIMEOUT_S, OUTPUT_CAP_CHARS, ExecResult, Sandbox
from .local import Limits, LocalSandbox, SandboxError, worker_command

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "OUTPUT_CAP_CHARS",
    "ExecResult",
    "Limits",
    "LocalSandbox",
    "Sandbox",
    "SandboxError",
    "open_sandbox",
    "worker_command",
]

SANDBOX_KINDS = ("local",)


@contextmanager
def open_sandbox(
    kind: str = "local", workdir: Path | None = None, **options: Any
) -> Iterator[Sandbox]:
    """Open a sandbox of ``kind`` and close it on exit.

    ``workdir=None`` uses a temporary directory that is removed on close; a given ``workdir`` is
    created if missing and kept. ``options`` go to the backend (``LocalSandbox``: ``limits``,
    ``python``, ``start_timeout``).
    """
    if kind not in SANDBOX_KINDS:
        raise ValueError(f"unknown sandbox kind {kind!r}: allowed kinds are "
                         f"{', '.join(SANDBOX_KINDS)} ('e2b' is planned but not available yet)")
    sandbox = LocalSandbox(workdir, **options)
    try:
        yield sandbox
    finally:
        sandbox.close()
