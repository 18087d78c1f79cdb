"""Sandboxes where model-written code runs: ``open_sandbox("local")`` gives one per episode.

``base.py`` is the contract (the ``Sandbox`` protocol, ``ExecResult``, ``SandboxError``); the
local backend (``local.py`` with its host plumbing ``host.py``, its ``Limits`` (``limits.py``),
the worker, isolation, cgroup and seccomp modules) and the E2B backend (``e2b.py``) implement it;
``BACKENDS`` is the registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vtb_agents.extensions import is_extension, load_extension

from .base import OUTPUT_CAP_CHARS, ExecResult, Sandbox, SandboxError, missing_members, sandbox_settings
from .e2b import E2BSandbox
from .limits import Limits
from .local import LocalSandbox, probe_in_background, worker_command

__all__ = [
    "BACKENDS",
    "OUTPUT_CAP_CHARS",
    "SANDBOX_KINDS",
    "E2BSandbox",
    "ExecResult",
    "Limits",
    "LocalSandbox",
    "Sandbox",
    "SandboxError",
    "backend",
    "open_backend",
    "open_sandbox",
    "probe_in_background",
    "sandbox_settings",
    "worker_command",
]


def _local(workdir: Path | None, options: dict[str, Any]) -> Sandbox:
    if options.pop("network", False):
        raise ValueError("the local sandbox never has network access: network needs the e2b sandbox")
    return LocalSandbox(workdir, **options)


def _e2b(workdir: Path | None, options: dict[str, Any]) -> Sandbox:
    options.pop("strict", None)  # an E2B sandbox is a separate machine: always fully isolated
    return E2BSandbox(workdir, **options)


Backend = Callable[[Path | None, dict[str, Any]], Sandbox]
BACKENDS: dict[str, Backend] = {"local": _local, "e2b": _e2b}
"""The built-in sandbox backends by kind: each builds a sandbox from a working directory and options."""
SANDBOX_KINDS = tuple(BACKENDS)
_log = logging.getLogger(__name__)


def backend(kind: str) -> Backend:
    """The backend of ``kind``: a built-in (``local``, ``e2b``), or your own class implementing
    :class:`Sandbox` named ``module:Class`` or by an installed package (entry point group
    ``vtb_agents.sandboxes``), built as ``Class(workdir, **options)`` (``workdir`` None in a run:
    :class:`Sandbox` says what each argument is); a bad kind raises ValueError.

    Your class failing to build, or building something that lacks the protocol, raises
    :class:`SandboxError` naming it and the cause: during a task that is the outcome
    ``sandbox_error`` (infrastructure, retried by ``--retry-errors``); before the run, the pre-run
    check refuses the run with that line.
    """
    if kind in BACKENDS:
        return BACKENDS[kind]
    if not is_extension("sandboxes", kind):
        raise ValueError(f"unknown sandbox kind {kind!r}: allowed kinds are {', '.join(SANDBOX_KINDS)}, "
                         "'module:Class' or an installed sandbox (`vtb sandboxes`)")
    cls = load_extension("sandboxes", kind)
    if not callable(cls):
        raise ValueError(f"sandbox {kind!r} is a {type(cls).__name__}, not a class implementing the Sandbox protocol")
    name = getattr(cls, "__name__", type(cls).__name__)

    def build(workdir: Path | None, options: dict[str, Any]) -> Sandbox:
        shown = ", ".join([repr(workdir), *(f"{key}={value!r}" for key, value in options.items())])
        try:
            sandbox = cls(workdir, **options)
        except Exception as exc:  # the user's constructor: the sandbox could not start
            hint = (" (a run builds it with workdir None: it makes its own working directory, see the Sandbox "
                    "protocol in vtb_agents/sandbox/base.py)") if workdir is None else ""
            raise SandboxError(f"sandbox {kind!r} could not be built as {name}({shown}): "
                               f"{type(exc).__name__}: {exc}{hint}") from exc
        missing = missing_members(sandbox)
        if missing:
            if callable(close := getattr(sandbox, "close", None)):
                close()  # whatever it started ends here
            raise SandboxError(f"sandbox {kind!r} built a {type(sandbox).__name__}, which lacks the Sandbox "
                               f"protocol's {', '.join(missing)} (vtb_agents/sandbox/base.py)")
        return sandbox

    return build


@contextmanager
def open_sandbox(
    kind: str = "local", workdir: Path | None = None, **options: Any
) -> Iterator[Sandbox]:
    """Open a sandbox of ``kind`` (:func:`backend`) and close it on exit (:func:`open_backend`).

    ``workdir=None`` uses a temporary directory that is removed on close; a given ``workdir`` is
    created if missing and kept. ``options`` go to the backend (``LocalSandbox``: ``limits``,
    ``python``, ``start_timeout``, ``isolation`` ("auto" | "bwrap" | "fallback" | "process"; default
    ``$VTB_SANDBOX_ISOLATION`` or "auto") and ``strict`` (refuse to start without bwrap);
    ``E2BSandbox``: ``api_key``, ``template``, ``lifetime_s``, ``network`` (internet access, off by
    default)). The level reached is
    ``sandbox.isolation``; ``isolation.py`` says what each local level guarantees.
    """
    with open_backend(backend(kind), kind, workdir, **options) as sandbox:
        yield sandbox


@contextmanager
def open_backend(build: Backend, kind: str, workdir: Path | None = None, **options: Any) -> Iterator[Sandbox]:
    """Open a sandbox with the backend ``build`` (of ``kind``, as messages name it: a run's plan loads
    the backend once, :mod:`vtb_agents.runner.plan`) and close it on exit.

    Once the body has finished, a failure to close is logged, never raised: the episode's answer
    is in, and tearing its sandbox down must not change how it ended.
    """
    sandbox = build(workdir, dict(options))
    try:
        yield sandbox
    except BaseException:
        sandbox.close()
        raise
    try:
        sandbox.close()
    except Exception:  # after the answer: a note for the operator, not the task's outcome
        _log.exception("closing the %s sandbox failed after its episode had finished", kind)
