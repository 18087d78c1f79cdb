"""Time limits for calls into code we do not control: a user's judge, a plugin tool.

Python cannot stop a thread, so a call that must end in time runs on a daemon thread of its own
(:func:`call_within`), with the caller's context variables; when its time is up the caller goes on
(:class:`CallTimedOut`) and the thread is left to finish or not: being a daemon, it never keeps
the process alive.

The current *deadline* (:func:`until`, a ``time.monotonic()`` instant held in a context variable)
is what a task's time limit or its grading window leaves: model and judge HTTP requests are cut
to it (:mod:`vtb_agents.models.http`), and so are the time-boxed calls (:func:`time_left`).
LangGraph runs nodes with a copy of the caller's context, so a deadline set around a graph's
``invoke`` reaches every node.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("vtb_deadline", default=None)


class CallTimedOut(TimeoutError):
    """A time-boxed call gave no result within its time (the call itself may still be running)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no result within {seconds:g} s")
        self.seconds = seconds


@contextmanager
def until(expires_at: float | None) -> Iterator[None]:
    """Within the block, the current deadline is ``expires_at`` (``time.monotonic()``; None: none)."""
    token = _deadline.set(expires_at)
    try:
        yield
    finally:
        _deadline.reset(token)


def deadline() -> float | None:
    """The current deadline (``time.monotonic()``), or None."""
    return _deadline.get()


def time_left(limit_s: float) -> float:
    """``limit_s``, or less if the current deadline comes sooner (never below zero)."""
    expires_at = _deadline.get()
    if expires_at is None:
        return limit_s
    return max(0.0, min(limit_s, expires_at - time.monotonic()))


def call_within(fn: Callable[[], T], seconds: float, name: str = "vtb-timebox") -> T:
    """``fn()``'s result (or what it raised) if it ends within ``seconds``; else :class:`CallTimedOut`.

    ``fn`` runs on a daemon thread named ``name`` with a copy of the caller's context variables
    (callbacks, usage tracking, the deadline). A call given no time is not started."""
    if seconds <= 0:
        raise CallTimedOut(0.0)
    done = threading.Event()
    box: dict[str, object] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["result"] = context.run(fn)
        except BaseException as exc:  # handed to the caller, raised there
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=name, daemon=True).start()
    if not done.wait(seconds):
        raise CallTimedOut(seconds)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]
