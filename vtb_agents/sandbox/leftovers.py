"""Sandbox folders marked with their owner's pid, and the removal of those a killed run left.

Why: a sandbox's working directory holds the task's images and whatever the code wrote (up to
its quota, 2 GiB); ``close()`` removes it, but a SIGKILLed run never closes. Each temporary
working directory is named ``<prefix><pid>-<random>``; the first sandbox a process starts removes
the folders of that prefix whose pid is no longer running. The sweep never fails the sandbox that
runs it: whatever a killed run's code left there (``removal.py``), a folder it cannot remove is
logged and left for a later sweep, and the whole sweep gives up after ``SWEEP_TIMEOUT_S``.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
import tempfile
import threading
import time
from pathlib import Path

from .cgroup import _alive  # the same "is that owner still running" test as orphaned cgroups
from .isolation import SANDBOX_ID
from .removal import REMOVAL_TIMEOUT_S, remove_tree

_log = logging.getLogger(__name__)
_SWEEP = threading.Lock()
SWEEP_TIMEOUT_S = REMOVAL_TIMEOUT_S
"""How long one process's sweep may spend removing leftovers; the rest waits for a later sweep."""


def owned_tempdir(prefix: str) -> Path:
    """A new temporary folder ``<prefix><pid>-<random>`` (after removing dead owners' leftovers)."""
    with _SWEEP:  # sandboxes start in several threads at once: one sweep per process and prefix
        remove_leftovers(prefix, tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


@functools.cache
def remove_leftovers(prefix: str, parent: str) -> list[str]:
    """Remove the ``<prefix><pid>-*`` folders in ``parent`` whose process is gone (once per
    process and prefix); returns their names. Symlinks and other users' folders are left alone.
    Never raises: what it cannot remove (or list) is logged."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)-[^/]+")
    owners = {os.getuid(), SANDBOX_ID}
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError as exc:
        _log.warning("could not look for sandbox folders left by killed runs in %s: %s", parent, exc)
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        if (left_s := deadline - time.monotonic()) <= 0:
            _log.warning("stopped removing sandbox folders left by killed runs in %s after %g s; "
                         "a later run goes on", parent, SWEEP_TIMEOUT_S)
            break
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid not in owners:
                continue
            remove_tree(Path(entry.path), left_s)
        except FileNotFoundError:
            continue  # another process is sweeping too
        except OSError as exc:  # RemovalError included: worth a note, never a failed run
            _log.warning("could not remove the sandbox folder %s left by a killed run: %s", entry.path, exc)
            continue
        removed.append(entry.name)
    if removed:
        _log.info("removed %d sandbox folder(s) left by killed runs in %s", len(removed), parent)
    return removed
