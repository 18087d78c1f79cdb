"""A run's limiters, served to its worker processes: K workers spend one budget, not K.

The parent process holds the run's :class:`~vtb_agents.models.limiter.Limiters`; a
:class:`LimiterServer` listens on a Unix socket (``multiprocessing.connection``, with a random key
that only the run's workers are sent) and answers each worker thread's ``acquire`` / ``release`` /
``absorbed`` on a thread of its own (an ``acquire`` blocks until the budget allows the request).
A worker's :class:`RemoteBudgets` is the same :class:`~vtb_agents.models.limiter.Budgets` as the
parent's limiters, one connection per thread. The Ray executor serves them from a named actor
instead (:mod:`vtb_agents.runner.ray_executor`), since Ray workers may be on other machines.
"""

from __future__ import annotations

import os
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from types import TracebackType
from typing import Any

from vtb_agents.models.limiter import Budgets, Grant, LimitKey
from vtb_agents.models.token_estimate import TokenEstimate

_METHODS = frozenset({"acquire", "release", "absorbed"})


class LimiterServer:
    """Serves ``budgets`` (the run's limiters) to worker processes while the block runs; ``address`` and
    ``authkey`` are what a worker's :class:`RemoteBudgets` connects with."""

    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self.authkey = os.urandom(32)
        self._listener = Listener(family="AF_UNIX", authkey=self.authkey)
        self.address: str = str(self._listener.address)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="vtb-limiters", daemon=True)

    def __enter__(self) -> LimiterServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._closed = True
        self._listener.close()  # the accepting thread's accept() fails and it ends

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection = self._listener.accept()
            except (OSError, EOFError, AuthenticationError):  # closed, or a client that failed the handshake
                continue
            threading.Thread(target=self._serve, args=(connection,), name="vtb-limiters-client", daemon=True).start()

    def _serve(self, connection: Connection) -> None:
        """Answer one worker thread's calls until it disconnects: ``("ok", value)`` or ``("error", exception)``."""
        with connection:
            while True:
                try:
                    method, args = connection.recv()
                except (EOFError, OSError):
                    return
                if method not in _METHODS:
                    connection.send(("error", ValueError(f"no limiter method {method!r}")))
                    continue
                try:
                    reply: tuple[str, Any] = ("ok", getattr(self.budgets, method)(*args))
                except Exception as exc:  # sent to the worker, raised there (RateLimitWait: a request's timeout)
                    reply = ("error", exc)
                try:
                    connection.send(reply)
                except OSError:
                    return


class RemoteBudgets:
    """The run's limiters as a worker process sees them: every call goes to the parent's :class:`LimiterServer`."""

    def __init__(self, address: str, authkey: bytes) -> None:
        self.address, self.authkey = address, authkey
        self._local = threading.local()

    def _call(self, method: str, *args: Any) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = Client(self.address, family="AF_UNIX", authkey=self.authkey)
        connection.send((method, args))
        kind, value = connection.recv()
        if kind == "error":
            raise value
        return value

    def acquire(self, key: LimitKey, estimate: TokenEstimate, timeout_s: float | None) -> Grant:
        """Wait, in the parent, for leave to send one request of ``key``."""
        grant: Grant = self._call("acquire", key, estimate, timeout_s)
        return grant

    def release(self, grant: Grant, status: int | None, headers: dict[str, str]) -> None:
        """Tell the parent the request of ``grant`` ended."""
        self._call("release", grant, status, headers)

    def absorbed(self, key: LimitKey) -> None:
        """Tell the parent a 429 of ``key`` was waited out."""
        self._call("absorbed", key)
