"""One writer per run directory: an exclusive ``flock`` on ``RUN_DIR/run.lock``.

Why: two ``vtb run --resume`` (or a run and a ``vtb grade``) on one directory would both append
results, duplicating lines and skewing every score. The lock is held for the whole run, regrade
or report write; a second writer fails at once, naming the holder's pid. The kernel drops the
lock when its holder exits, however it exits (even SIGKILL), so a crashed run never blocks the
next one; the file itself stays (removing it would race with a new holder).

A command that writes a run and then its report holds one :func:`run_dir_scope` around both, so
no other writer takes the directory between them (it would find the report half-written, or
append to results the report then misses).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from vtb_agents.rundir.layout import LOCK_FILE


class RunDirBusy(ValueError):
    """Another process holds the run directory's lock (the message names its pid and command)."""


@dataclass
class _Kept:
    """A run directory whose lock this context keeps once taken (``fd`` is None until then)."""

    path: Path
    fd: int | None = None


_SCOPES: ContextVar[tuple[_Kept, ...]] = ContextVar("vtb_run_dir_scopes", default=())


def _kept(run_dir: Path) -> _Kept | None:
    path = Path(run_dir).resolve()
    return next((k for k in _SCOPES.get() if k.path == path), None)


@contextmanager
def run_dir_scope(run_dir: Path) -> Iterator[None]:
    """Keep ``run_dir``'s lock, from the first :func:`run_dir_lock` inside the block (the
    directory need not exist yet), until the block ends; locks taken again inside it are the same.

    For a command that runs, then writes the report: without the scope, another writer could take
    the directory in between.
    """
    kept = _Kept(Path(run_dir).resolve())
    token = _SCOPES.set((*_SCOPES.get(), kept))
    try:
        yield
    finally:
        _SCOPES.reset(token)
        if kept.fd is not None:
            os.close(kept.fd)  # releases the lock


def _acquire(run_dir: Path) -> int:
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "pid unknown"
        os.close(fd)
        raise RunDirBusy(f"{run_dir} is in use by another process ({holder}): wait for it to "
                         "finish or stop it; one run directory takes one writer at a time") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def run_dir_lock(run_dir: Path, action: str) -> Iterator[None]:
    """Hold the exclusive lock of ``run_dir`` (which must exist) while the block runs.

    ``action`` says what the holder does ("vtb run"), for the message another writer gets.
    Raises :class:`RunDirBusy` at once if another process (or another open of this process,
    outside a :func:`run_dir_scope` that holds it) holds it.
    """
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    kept = _kept(run_dir)
    if kept is not None and kept.fd is not None:
        yield  # this context holds it already
        return
    fd = _acquire(run_dir)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {action}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    if kept is not None:
        kept.fd = fd  # the scope releases it
        yield
        return
    try:
        yield
    finally:
        os.close(fd)  # releases the lock
