"""Independent steps of a test run side by side: ``together(f, g)`` is ``[f(), g()]``, each in a thread.

Most of a test's wall time is spent waiting (a ``vtb`` subprocess waiting on a task's time limit or a
scripted server's delay, a second process importing the package while the first one sleeps): two runs
that depend on nothing of each other's (different output folders, different servers) overlap their
waits instead of adding them. Each step runs exactly as it would alone; only steps that share nothing
mutable may be given together.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def together(*steps: Callable[[], Any]) -> list[Any]:
    """The results of ``steps``, in order, each run in a thread of its own at the same time; the first
    step's exception (in order) is raised once all have ended."""
    with ThreadPoolExecutor(max_workers=len(steps)) as pool:
        futures = [pool.submit(step) for step in steps]
    return [future.result() for future in futures]
