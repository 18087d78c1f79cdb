"""Ctrl-C and SIGTERM during ``vtb run`` and ``vtb ablate``: the first stops cleanly, a second ends now.

The first signal sets the run's ``stop`` event: no new task starts, running ones finish and are
written, and ``--resume`` continues. A second one (Ctrl-C or SIGTERM, in any order) ends the
process at once, whatever its tasks are doing: a thread stuck in a judge or a tool of your own
cannot be interrupted in Python, so the process exits (``os._exit``) from a thread of its own as
soon as no result line is being appended (:data:`~vtb_agents.rundir.store.APPENDING`): every line
of ``results.jsonl`` is whole, each one already flushed to disk, and ``--resume`` continues.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ABORT_WAIT_S = 10.0
"""How long an abort waits for a result line being appended to be complete (a hung disk: it goes anyway,
and ``--resume`` moves a partial line aside)."""
_SHOW_CURSOR = "\x1b[?25h"


def abort_now(code: int) -> None:
    """End the process with ``code`` once no result line is half-written (see the module docstring)."""
    from vtb_agents.rundir.store import APPENDING

    APPENDING.acquire(timeout=ABORT_WAIT_S)  # held until the process ends: no line starts after this
    note = "aborted: every result written so far is kept; continue the run with --resume\n"
    try:
        os.write(sys.stderr.fileno(), ((_SHOW_CURSOR if sys.stderr.isatty() else "") + "\n" + note).encode())
    except (OSError, ValueError):  # no usable stderr: the exit status still says it
        pass
    os._exit(code)


@contextmanager
def stop_on_signals(stop: threading.Event, on_stop: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM set ``stop`` (then ``on_stop()`` runs); a second signal
    ends the process at once with status 128 + its number (:func:`abort_now`)."""

    def second(signum: int, frame: Any) -> None:
        threading.Thread(target=abort_now, args=(128 + signum,), name="vtb-abort", daemon=True).start()

    def first(signum: int, frame: Any) -> None:
        stop.set()
        signal.signal(signal.SIGINT, second)
        signal.signal(signal.SIGTERM, second)
        on_stop()

    previous = signal.signal(signal.SIGINT, first)
    previous_term = signal.signal(signal.SIGTERM, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
