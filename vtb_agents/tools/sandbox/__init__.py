"""Sandboxes where model-written code runs: ``open_sandbox("local")`` gives one per episode."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import DEFAULT_TIMEOUT_S, OUTPUT_CAP_CHARS, ExecResult, Sandbox
from .e2b import E2BSandbox
from .local import Limits, LocalSandbox, SandboxError, worker_command

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "OUTPUT_CAP_CHARS",
    "E2BSandbox",
    "ExecResult",
    "Limits",
    "LocalSandbox",
    "Sandbox",
    "SandboxError",
    "open_sandbox",
    "worker_command",
]

SANDBOX_KINDS = ("local", "e2b")


@contextmanager
def open_sandbox(
    kind: str = "local", workdir: Path | None = None, **options: Any
) -> Iterator[Sandbox]:
    """Open a sandbox of ``kind`` and close it on exit.

    ``workdir=None`` uses a temporary directory that is removed on close; a given ``workdir`` is
    created if missing and kept. ``options`` go to the backend (``LocalSandbox``: ``limits``,
    ``python``, ``start_timeout``, ``isolation`` ("auto" | "bwrap" | "fallback" | "process"; default
    ``$VTB_SANDBOX_ISOLATION`` or "auto") and ``strict`` (refuse to start without bwrap);
    ``E2BSandbox``: ``api_key``, ``template``, ``lifetime_s``, ``network`` (internet access, off by
    default)). The level reached is
    ``sandbox.isolation``; ``isolation.py`` says what each local level guarantees.
    """
    if kind not in SANDBOX_KINDS:
        raise ValueError(f"unknown sandbox kind {kind!r}: allowed kinds are {', '.join(SANDBOX_KINDS)}")
    if kind == "local" and options.pop("network", False):
        raise ValueError("the local sandbox never has network access: network needs the e2b sandbox")
    if kind == "e2b":
        options.pop("strict", None)  # an E2B sandbox is a separate machine: always fully isolated
        sandbox: Sandbox = E2BSandbox(workdir, **options)
    else:
        sandbox = LocalSandbox(workdir, **options)
    try:
        yield sandbox
    finally:
        sandbox.close()
