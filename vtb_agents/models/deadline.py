"""A task's time limit, enforced inside any LangChain runnable: our graphs and users' agents alike.

``TaskDeadline`` is a callback handler: passed in a run's ``callbacks``, it raises ``TaskTimeout``
at the start of the next graph step, chain, model call or tool call once the limit has passed, and
at the end of a model call whose reply came after it.
LangChain hands callbacks down to every nested runnable, so the check reaches inside
``create_agent`` graphs and other agents we did not write. ``closing`` also closes the task's
sandbox when the limit passes, so code running at that moment stops instead of finishing its
own (longer) per-call timeout. A model request already in flight ends at the limit too:
``task_time_limit`` caps the HTTP timeouts of bounded clients (:mod:`vtb_agents.models.http`), and
:func:`within_task_limit` stops waiting for code whose requests are not ours (a user's agent).
The handler also follows the task's model calls (started, answered, failed), and the
``TaskTimeout`` it raises carries what the provider had done by then (:class:`ProviderWait`), from
which :mod:`vtb_agents.models.blame` decides whose doing the timeout is.

Example:
    >>> deadline = TaskDeadline(30.0)
    >>> # graph.invoke(inputs, {"callbacks": [deadline]})
    >>> # or, closing the sandbox too:
    >>> # with task_time_limit(30.0, sandbox, config) as config: graph.invoke(inputs, config)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from vtb_agents.models.http import requests_until
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.timebox import CallTimedOut, call_within

T = TypeVar("T")


@dataclass(frozen=True)
class ProviderWait:
    """What the task's model calls had got from the provider when its time limit passed."""

    waiting: bool
    """A model call was in flight, or between two attempts after a failed one, when the limit passed."""
    answered: bool
    """The provider had answered at least one model call of the task."""
    failed_attempt: bool
    """The call in progress had already failed an attempt before the limit (timed out, 5xx, dropped)."""

    def describe(self) -> str:
        """The facts in words, for the episode's error message."""
        if not self.waiting:
            return "no model request was pending"
        answers = "had answered earlier requests" if self.answered else "had not answered any request of the task"
        failed = "; the pending request had already failed an attempt" if self.failed_attempt else ""
        return f"a model request was pending and the provider {answers}{failed}"


NOT_WAITING = ProviderWait(waiting=False, answered=False, failed_attempt=False)


class TaskTimeout(TimeoutError):
    """A task ran past its time limit; raised at the next model call, never retried. ``wait`` says
    what the provider had done by then (see :mod:`vtb_agents.models.blame`)."""

    passes_tool_guard = True  # ends the episode: a tool call never turns it into a message

    def __init__(self, message: str, wait: ProviderWait = NOT_WAITING) -> None:
        super().__init__(message)
        self.wait = wait


class QuietHandlerErrors(logging.Filter):
    """Drops langchain-core's "Error in <handler>..." warning for handlers that end a run on
    purpose (``TaskDeadline``, a user's agent's round cap): the task's result reports it."""

    handlers = {"TaskDeadline"}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and args[0] in self.handlers)


logging.getLogger("langchain_core.callbacks.manager").addFilter(QuietHandlerErrors())


class TaskDeadline(BaseCallbackHandler):
    """Raises ``TaskTimeout`` at the next LangChain step after ``seconds`` have passed, and follows
    the task's model calls to say in it whether the provider was being waited on (``ProviderWait``)."""

    raise_error = True  # LangChain re-raises what this handler raises, instead of logging it
    run_inline = True

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"a task time limit must be positive, not {seconds}")
        self.seconds = seconds
        self.expires_at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._pending: set[UUID] = set()
        self._answered = False
        self._failed_attempt = False  # since the last answer, an attempt failed before the limit
        self._cut_off = False  # an attempt was still waiting for the provider when the limit passed

    @property
    def expired(self) -> bool:
        """True once the time limit has passed."""
        return time.monotonic() >= self.expires_at

    def provider_wait(self) -> ProviderWait:
        """What the provider had done when the limit passed (meaningful once it has)."""
        with self._lock:
            return ProviderWait(waiting=bool(self._pending) or self._cut_off or self._failed_attempt,
                                answered=self._answered, failed_attempt=self._failed_attempt)

    def timeout(self, detail: str = "") -> TaskTimeout:
        """The ``TaskTimeout`` of this limit, with what the provider had done by now."""
        wait = self.provider_wait()
        return TaskTimeout(f"the task ran past its time limit of {self.seconds:g} s ({wait.describe()})"
                           f"{detail}", wait)

    def check(self) -> None:
        """Raise ``TaskTimeout`` if the time limit has passed."""
        if self.expired:
            raise self.timeout()

    def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    def _model_call_started(self, run_id: UUID) -> None:
        self.check()
        with self._lock:
            self._pending.add(run_id)

    def on_chat_model_start(self, *args: Any, run_id: UUID, **kwargs: Any) -> None:
        self._model_call_started(run_id)

    def on_llm_start(self, *args: Any, run_id: UUID, **kwargs: Any) -> None:
        self._model_call_started(run_id)

    def _model_call_ended(self, run_id: UUID, *, answered: bool) -> bool:
        """Record a model call's end (an answer, or a failed attempt); True if the limit had passed,
        when the call counts as cut off: no answer within the time given."""
        expired = self.expired
        with self._lock:
            self._pending.discard(run_id)
            if expired:
                self._cut_off = True
            elif answered:
                self._answered, self._failed_attempt = True, False
            else:
                self._failed_attempt = True
        return expired

    def on_llm_end(self, *args: Any, run_id: UUID, **kwargs: Any) -> None:
        """A reply that arrives after the limit is not taken, and counts as no answer within the
        time given: a model client we did not build (a user's agent's own) may wait past the limit,
        where ours cut the request at it, and both must end the same way."""
        if self._model_call_ended(run_id, answered=True):
            raise self.timeout()

    def on_llm_error(self, *args: Any, run_id: UUID, **kwargs: Any) -> None:
        self._model_call_ended(run_id, answered=False)

    def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    @contextmanager
    def closing(self, sandbox: Sandbox) -> Iterator[None]:
        """Close ``sandbox`` when the limit passes; turn what that breaks into ``TaskTimeout``.

        Closing stops the code call running at that moment; whatever the closed sandbox or this
        handler then makes fail inside the block is re-raised as ``TaskTimeout`` from that error.
        """
        timer = threading.Timer(max(0.0, self.expires_at - time.monotonic()), sandbox.close)
        timer.daemon = True
        timer.start()
        try:
            yield
        except TaskTimeout:
            raise
        except Exception as exc:
            if not self.expired:
                raise
            raise self.timeout(f", stopped during: {type(exc).__name__}: {exc}") from exc
        finally:
            timer.cancel()


def task_deadline(config: Mapping[str, Any]) -> TaskDeadline | None:
    """The ``TaskDeadline`` among ``config``'s callbacks (a list of handlers, or the callback manager a
    LangGraph node receives), or None."""
    callbacks = config.get("callbacks")
    handlers = callbacks if isinstance(callbacks, list) else getattr(callbacks, "handlers", None) or []
    return next((handler for handler in handlers if isinstance(handler, TaskDeadline)), None)


def within_task_limit(fn: Callable[[], T], config: Mapping[str, Any], name: str) -> T:
    """``fn()``, ended at the time limit of ``config``'s ``TaskDeadline`` (none: ``fn()`` as it is).

    For a call into code we did not write whose requests we cannot cut, a user's agent with its own
    model client: its request may wait for the provider long past the limit (the client's own
    timeout), where ours are cut at it. At the limit the caller gets ``TaskTimeout``, as from a
    request of ours, and the call is left on a daemon thread (:func:`~vtb_agents.timebox.call_within`).
    """
    deadline = task_deadline(config)
    if deadline is None:
        return fn()
    try:
        return call_within(fn, deadline.expires_at - time.monotonic(), name)
    except CallTimedOut:
        raise deadline.timeout() from None


def with_deadline(config: dict[str, Any], deadline: TaskDeadline | None) -> dict[str, Any]:
    """``config`` with ``deadline`` added to its callbacks (unchanged when there is none)."""
    if deadline is None:
        return config
    callbacks = config.get("callbacks") or []
    if not isinstance(callbacks, list):
        raise TypeError("with_deadline needs config['callbacks'] as a list of handlers")
    return {**config, "callbacks": [*callbacks, deadline]}


@contextmanager
def task_time_limit(seconds: float | None, sandbox: Sandbox,
                    config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield ``config`` carrying a ``TaskDeadline`` of ``seconds``, with ``sandbox`` closed at the
    limit (see ``TaskDeadline.closing``) and model requests cut off at it (``requests_until``);
    without a limit, ``config`` unchanged."""
    if not seconds:
        yield config
        return
    deadline = TaskDeadline(seconds)
    with deadline.closing(sandbox), requests_until(deadline.expires_at):
        yield with_deadline(config, deadline)
