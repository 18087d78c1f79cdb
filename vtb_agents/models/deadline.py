"""A task's time limit, enforced inside any LangChain runnable: our graphs and users' agents alike.

``TaskDeadline`` is a callback handler: passed in a run's ``callbacks``, it raises ``TaskTimeout``
at the start of the next graph step, chain, model call or tool call once the limit has passed, and
at the end of a model call whose reply came after it.
LangChain hands callbacks down to every nested runnable, so the check reaches inside
``create_agent`` graphs and other agents we did not write. ``closing`` also closes the task's
sandbox when the limit passes, so code running at that moment stops instead of finishing its
own (longer) per-call timeout. A model request already in flight ends at the limit too:
``task_time_limit`` caps the HTTP timeouts of bounded clients (:mod:`vtb_agents.models.http`).

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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from vtb_agents.models.http import requests_until
from vtb_agents.sandbox.base import Sandbox


class TaskTimeout(TimeoutError):
    """A task ran past its time limit; raised at the next model call, never retried."""

    passes_tool_guard = True  # ends the episode: a tool call never turns it into a message


class QuietHandlerErrors(logging.Filter):
    """Drops langchain-core's "Error in <handler>..." warning for handlers that end a run on
    purpose (``TaskDeadline``, a user's agent's round cap): the task's result reports it."""

    handlers = {"TaskDeadline"}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and args[0] in self.handlers)


logging.getLogger("langchain_core.callbacks.manager").addFilter(QuietHandlerErrors())


class TaskDeadline(BaseCallbackHandler):
    """Raises ``TaskTimeout`` at the next LangChain step after ``seconds`` have passed."""

    raise_error = True  # LangChain re-raises what this handler raises, instead of logging it
    run_inline = True

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"a task time limit must be positive, not {seconds}")
        self.seconds = seconds
        self.expires_at = time.monotonic() + seconds

    @property
    def expired(self) -> bool:
        """True once the time limit has passed."""
        return time.monotonic() >= self.expires_at

    def check(self) -> None:
        """Raise ``TaskTimeout`` if the time limit has passed."""
        if self.expired:
            raise TaskTimeout(f"the task ran past its time limit of {self.seconds:g} s")

    def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        """A reply that arrives after the limit is not taken: a model client we did not build (a
        user's agent's own) may wait past the limit, where ours cut the request at it."""
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
            raise TaskTimeout(f"the task ran past its time limit of {self.seconds:g} s "
                              f"(stopped during: {type(exc).__name__}: {exc})") from exc
        finally:
            timer.cancel()


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
