"""The garbage collector's settings for the ``vtb`` process (never for a library user's process).

A command imports LangChain, LangGraph and the provider SDKs (hundreds of thousands of objects that
live until the process ends) and then runs many small tasks. With Python's default thresholds the
collector runs ~700 times in a 64-task run, each older-generation pass re-scanning every imported
object while holding the GIL (0.4-0.7 s in all, measured in BENCHMARKS.md), and at exit it tears the
whole heap down again (0.5-1 s). Larger thresholds keep young-object collection, so cycles are still
freed during a long run; freezing the heap at exit leaves its memory to the operating system.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 20)
"""Allocations between young collections, and young collections between older ones (default 700, 10, 10)."""


def tune_for_command() -> None:
    """Collect less often: start-up and the run allocate mostly objects that live to the end."""
    gc.set_threshold(*THRESHOLDS)


def skip_collection_at_exit() -> None:
    """Move every object to the permanent generation, so the interpreter's exit does not collect them.

    Files, locks and subprocesses are closed by their own context managers before this runs; atexit
    handlers still run."""
    gc.freeze()
