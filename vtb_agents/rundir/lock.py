"""One writer per run directory: an exclusive ``flock`` on ``RUN_DIR/run.lock``.

Why: two ``vtb run --resume`` (or a run and a ``vtb grade``) on one directory would both append
results, duplicating lines and skewing every score. The lock is held for the whole run, regrade
or report write; a second writer fails at once, naming the holder's pid. The kernel drops the
lock when its holder exits, however it exits (even SIGKILL), so a crashed run never blocks the
next one; the file itself stays (removing it would race with a new holder).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vtb_agents.rundir.layout import LOCK_FILE


class RunDirBusy(ValueError):
    """Another process holds the run directory's lock (the message names its pid and command)."""


@contextmanager
def run_dir_lock(run_dir: Path, action: str) -> Iterator[None]:
    """Hold the exclusive lock of ``run_dir`` (which must exist) while the block runs.

    ``action`` says what the holder does ("vtb run"), for the message another writer gets.
    Raises :class:`RunDirBusy` at once if another process (or another open of this process)
    holds it.
    """
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run directory")
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "pid unknown"
            raise RunDirBusy(f"{run_dir} is in use by another process ({holder}): wait for it to "
                             "finish or stop it; one run directory takes one writer at a time") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {action}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
