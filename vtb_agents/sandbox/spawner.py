"""Start the sandbox's processes from one thread that lives as long as this process.

A worker at the fallback and process levels dies with the host through ``PR_SET_PDEATHSIG``, but
Linux sends that signal when the *thread* that forked the child ends, not the process (prctl(2));
under bwrap the sandbox ends when the host's end of its channel closes (``isolation.py``), which a
thread's end does not do either. Callers run a sandbox from whatever thread they have: a LangChain
agent runs its tools in pool threads that end after each turn, Studio and the runner use threads of
their own. A worker forked by such a thread would be killed with its Python state as soon as the
thread ends. So every process of the local sandbox is started by :func:`spawn`, which hands the
``Popen`` call to one daemon thread per process: it ends only when the process does, which is
exactly when its workers should die.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future

Start = Callable[[], "subprocess.Popen[bytes]"]
"""A ``subprocess.Popen(...)`` call, made by the spawner thread."""
_Request = tuple[Start, "Future[subprocess.Popen[bytes]]"]
_lock = threading.Lock()
_requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
_thread: threading.Thread | None = None


def spawn(start: Start) -> subprocess.Popen[bytes]:
    """``start()`` (a ``subprocess.Popen`` call) made by the process-wide spawner thread, which
    forks the process; its result returned here.

    Errors of ``start`` are raised here, in the caller. A caller interrupted while it waits (e.g.
    KeyboardInterrupt) leaves no process behind: one started after all is killed and reaped.
    """
    future: Future[subprocess.Popen[bytes]] = Future()
    _spawner().put((start, future))
    try:
        return future.result()
    except BaseException:
        if not future.cancel():  # not cancelled: started already, or done (Popen's own error)
            future.add_done_callback(_kill_abandoned)
        raise


def _spawner() -> queue.SimpleQueue[_Request]:
    """The request queue, with its thread running (started on first use)."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, args=(_requests,), name="vtb-sandbox-spawner",
                                       daemon=True)
            _thread.start()
        return _requests


def _serve(requests: queue.SimpleQueue[_Request]) -> None:
    """The spawner thread: make each request's ``Popen`` call, hand back the process or the error."""
    while True:
        start, future = requests.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            proc = start()
        except BaseException as exc:  # handed to the caller, who raises it
            future.set_exception(exc)
        else:
            future.set_result(proc)


def _kill_abandoned(future: Future[subprocess.Popen[bytes]]) -> None:
    """Kill and reap a process whose caller stopped waiting for it."""
    if future.cancelled() or future.exception() is not None:
        return
    proc = future.result()
    proc.kill()
    proc.wait()


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: it starts a spawner of its own."""
    global _thread, _requests, _lock
    _thread, _requests, _lock = None, queue.SimpleQueue(), threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
