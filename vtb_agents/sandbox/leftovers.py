"""Sandbox folders marked with their owner's pid, and the removal of those a killed run left.

Why: a sandbox's working directory holds the task's images and whatever the code wrote (up to
its quota, 2 GiB); ``close()`` removes it, but a SIGKILLed run never closes. Each temporary
working directory is named ``<prefix><pid>-<random>``; the first sandbox a process starts removes
the folders of that prefix whose pid is no longer running.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from .cgroup import _alive  # the same "is that owner still running" test as orphaned cgroups
from .isolation import SANDBOX_ID

_log = logging.getLogger(__name__)
_SWEEP = threading.Lock()


def owned_tempdir(prefix: str) -> Path:
    """A new temporary folder ``<prefix><pid>-<random>`` (after removing dead owners' leftovers)."""
    with _SWEEP:  # sandboxes start in several threads at once: one sweep per process and prefix
        remove_leftovers(prefix, tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


@functools.cache
def remove_leftovers(prefix: str, parent: str) -> list[str]:
    """Remove the ``<prefix><pid>-*`` folders in ``parent`` whose process is gone (once per
    process and prefix); returns their names. Symlinks and other users' folders are left alone."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)-[^/]+")
    owners = {os.getuid(), SANDBOX_ID}
    removed = []
    for entry in os.scandir(parent):
        match = pattern.fullmatch(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid not in owners:
                continue
            shutil.rmtree(entry.path)
        except FileNotFoundError:
            continue  # another process is sweeping too
        except OSError as exc:  # another user's files inside, say: worth a note, not a failed run
            _log.warning("could not remove the sandbox folder %s left by a killed run: %s", entry.path, exc)
            continue
        removed.append(entry.name)
    if removed:
        _log.info("removed %d sandbox folder(s) left by killed runs in %s", len(removed), parent)
    return removed
