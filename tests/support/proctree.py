"""Processes below a process, from ``/proc`` (shared by the sandbox tests and ``bench/``)."""

from __future__ import annotations

import os
from pathlib import Path


def tree(root: int) -> list[int]:
    """``root`` and every process below it, parents first (``/proc/PID/task/TID/children``)."""
    found = [root]
    for pid in found:
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):  # it ended meanwhile
            continue
    return found
