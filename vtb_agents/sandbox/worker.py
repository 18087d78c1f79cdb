"""The sandbox worker: a persistent Python interpreter that runs code cells for ``LocalSandbox``.

Started as ``python -I [-S] -B worker.py CTL_IN CTL_OUT LIMITS_JSON [SETUP_JSON]`` (standard
library only, because ``-I`` keeps this file's package off ``sys.path``). SETUP_JSON says how the
worker confines itself before serving (see isolation.py): ``level``; ``fallback`` (config for
``isolation.enter_fallback``, loaded by path from ``module``); ``drop`` (switch to uid/gid 65534
once the rlimits are set); ``chdir`` (the working directory, entered after the switch);
``seccomp`` (hex of a filter program from seccomp.py, installed last); ``site`` (with ``-S``: the
site-packages directories and prefixes ``site`` would have set, see ``local.site_setup``);
``parent`` (the host's pid: die with it, at the fallback and process levels);
``tracker`` (the source of ``region_tracker.py``, run before the first kernel starts).

Two processes, so that model code never holds the host's channel:

- the *supervisor* (this process, once confined) owns the control pipes to the host (``CTL_IN``:
  requests, ``CTL_OUT``: results). It never runs model code and makes itself non-dumpable, so
  code running as the same uid can neither open its fds through ``/proc`` nor trace it.
- the *kernel*, a child forked by the supervisor, runs the cells and keeps the Python state
  across calls. It inherits none of the host's fds; it talks to the supervisor over a pipe pair
  of its own. Model code can reach that pair, so the supervisor treats what comes out of it as
  untrusted: frames are size-capped (``MAX_FRAME``) and must be JSON of the reply schema. The
  first reply for the call in progress answers it; well-formed replies for earlier calls are
  dropped (a forged reply is followed by the real one, which must not answer the next call).
  Anything else (a malformed or oversized frame, a reply for a later call, a closed pipe) stops
  and replaces the kernel, and the call fails with state lost: the model's own doing, reported to
  it, never an error of the episode. A forged well-formed reply only answers its own call: the
  model lying to itself.

When the kernel dies (``os._exit``, a signal, the CPU limit) the supervisor reaps it, reports how
and forks a fresh one. When the host is gone (its end of ``CTL_IN`` closed: it ended, however) the
supervisor kills the kernel and exits, between calls and during one alike: that, not a parent-death
signal, is how a worker under bwrap dies with its host (isolation.py says why). Frames are 4-byte
big-endian length + UTF-8 JSON. fd 1 and 2 are pipes the host drains, so whatever user code prints,
even with ``os.write(1, ...)`` or from C, is captured and can never be mistaken for a control
message.

Requests: ``{"op": "run", "id": n, "code": str}``. Replies: ``{"op": "ready", "pid": ...,
"uid": ..., "isolation": level}`` once at start, then per request ``{"id": n, "ok": bool,
"error": str | None, "traceback": str, "reset_before": Reset | None, "failure": Reset | None}``
where ``Reset`` is ``{"exit": status}`` (the kernel died: exit code, or minus the signal) or
``{"channel": reason}`` (the code misused the kernel's channel); ``reset_before`` says the state
was lost before the call ran, ``failure`` that the call itself ended that way.
"""

from __future__ import annotations

import ast
import io
import json
import linecache
import os
import select
import signal
import struct
import sys
import time
import traceback

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every sandbox ~3 ms of its start
if TYPE_CHECKING:
    from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME = 4 * 1024 * 1024
"""Largest control frame either side accepts (replies are a few kB; code is at most a few MB)."""
_POLL_S = 0.1
_ERROR_CHARS = 1_000
_TRACEBACK_CHARS = 20_000
_THIS_FILE = os.path.abspath(__file__)
_SANDBOX_ID = 65534


def encode_frame(obj: dict[str, Any]) -> bytes:
    """One control frame: 4-byte big-endian length, then the UTF-8 JSON of ``obj``."""
    data = json.dumps(obj).encode("utf-8")
    return _HEADER.pack(len(data)) + data


def decode_frame(buffer: bytearray) -> dict[str, Any] | None:
    """Remove and return the first complete frame in ``buffer``; None if it is incomplete."""
    if len(buffer) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    if size > MAX_FRAME:
        raise ValueError(f"control frame of {size} bytes is too large")
    if len(buffer) < _HEADER.size + size:
        return None
    body = bytes(buffer[_HEADER.size:_HEADER.size + size])
    del buffer[:_HEADER.size + size]
    frame = json.loads(body)
    if not isinstance(frame, dict):
        raise ValueError(f"control frame is a JSON {type(frame).__name__}, not an object")
    return frame


def write_frame(fd: int, obj: dict[str, Any]) -> None:
    """Send one frame on ``fd`` (blocking, handles short writes)."""
    view = memoryview(encode_frame(obj))
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes | None:
    """Read exactly ``n`` bytes, or None on end of file."""
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict[str, Any] | None:
    """Receive one frame from ``fd``; None when the other side closed the pipe."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"control frame of {size} bytes is too large")
    body = _read_exact(fd, size)
    return None if body is None else json.loads(body)


def _reap_adopted(*_: object) -> None:
    """SIGCHLD of a supervisor that is pid 1 (a worker under bwrap, ``--as-pid-1``): reap the
    processes the code left orphaned, which the kernel re-parents to it; never a kernel (its
    ``_Kernel`` reaps it and reads its status)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in _kernels:
            return
        os.waitpid(info.si_pid, 0)


_kernels: set[int] = set()
"""The pids of this supervisor's kernels not reaped yet."""


class HostGone(Exception):
    """The host closed its end of the control pipe (it ended) while a cell ran."""


def close_other_fds(keep: list[int]) -> None:
    """Close every fd but 0, 1, 2 and ``keep``: what the process that started this one left open
    (bwrap's info pipe, say) is nothing the sandbox's code should hold."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 16)


def _set_limits(limits: dict[str, int]) -> None:
    """Apply rlimits to this process (inherited by anything it starts).

    Done here rather than in a ``preexec_fn`` because ``preexec_fn`` is unsafe in a threaded parent.
    CPU gets a hard limit a few seconds above the soft one: SIGXCPU first, then SIGKILL.
    """
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("address_space_bytes"):
        n = limits["address_space_bytes"]
        resource.setrlimit(resource.RLIMIT_AS, (n, n))
    if limits.get("cpu_seconds"):
        n = limits["cpu_seconds"]
        resource.setrlimit(resource.RLIMIT_CPU, (n, n + 5))
    if limits.get("file_size_bytes"):
        n = limits["file_size_bytes"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    if limits.get("processes"):  # the host sends 0 at the "process" level (same uid as the host)
        n = limits["processes"]
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


def _die_with_parent(parent: int) -> None:
    """PR_SET_PDEATHSIG: SIGKILL this process when the host thread that started it ends (the host
    starts workers from a thread that lives as long as it, ``spawner.py``); exit at once if the
    host ``parent`` is gone already."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(70)


def _confine(setup: dict[str, Any], ctl_fds: tuple[int, int]) -> None:
    """Close inherited fds, enter the fallback namespaces if asked (see isolation.py)."""
    low, high = sorted(ctl_fds)
    os.closerange(3, low)  # e.g. bwrap's --info-fd / --userns-block-fd ends
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 16)
    if setup.get("fallback") is not None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("vtb_sandbox_isolation", setup["module"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {setup['module']}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.enter_fallback(setup["fallback"], ctl_fds)  # returns in the confined grandchild


def _drop_privileges() -> None:
    """Become uid/gid 65534 with no supplementary groups (clears every capability).

    The switch makes the process non-dumpable, which would give /proc/self to root: dumpable is
    set back so that the code can read its own /proc entries (core dumps stay off: RLIMIT_CORE 0).
    """
    import ctypes

    os.setgroups([])
    os.setgid(_SANDBOX_ID)
    os.setuid(_SANDBOX_ID)
    if os.getuid() != _SANDBOX_ID or os.geteuid() != _SANDBOX_ID:
        raise PermissionError("the worker could not switch to uid 65534")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 1, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 1) failed")


def _install_seccomp(program_hex: str) -> None:
    """Install the host-built seccomp filter (seccomp.py) on this process and all it will start.

    ``PR_SET_NO_NEW_PRIVS`` first, which the kernel requires of an unprivileged filter and which
    also keeps set-uid programs from regaining privileges.
    """
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = bytes.fromhex(program_hex)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    ulong = ctypes.c_ulong
    if libc.prctl(38, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(22, ulong(2), ctypes.byref(fprog), ulong(0), ulong(0)) != 0:  # SECCOMP filter
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _clip(text: str, limit: int) -> str:
    """``text`` made JSON/UTF-8 safe and cut to ``limit`` characters."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters cut]"


def _one_line(exc: BaseException) -> str:
    """``ZeroDivisionError: division by zero``: type and the first line of the message."""
    try:
        message = str(exc)
    except Exception as str_error:  # a user-defined __str__ may itself raise
        message = f"<str() failed: {type(str_error).__name__}>"
    lines = message.strip().splitlines()
    text = type(exc).__name__ + (f": {lines[0]}" if lines else "")
    return _clip(text + (" [...]" if len(lines) > 1 else ""), _ERROR_CHARS)


def _user_traceback(exc: BaseException) -> str:
    """The traceback without this file's frames (the user sees only their own code)."""
    tb = None if isinstance(exc, SyntaxError) else exc.__traceback__  # compiler frames
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == _THIS_FILE:
        tb = tb.tb_next
    return _clip("".join(traceback.format_exception(type(exc), exc, tb)), _TRACEBACK_CHARS)


class _Streams:
    """Keeps fd 1/2 and ``sys.stdout``/``sys.stderr`` pointing at the parent's capture pipes."""

    def __init__(self) -> None:
        self.saved = (os.dup(1), os.dup(2))  # dup() is non-inheritable: children use fd 1/2
        self.wrappers: list[io.TextIOWrapper] = []

    def reset(self) -> None:
        """Undo whatever the last cell did to fd 1/2 and sys.stdout/sys.stderr."""
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        self.wrappers = [
            io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
                             encoding="utf-8", errors="backslashreplace", line_buffering=True,
                             write_through=True)
            for fd in (1, 2)
        ]
        sys.stdout, sys.stderr = self.wrappers

    def flush(self) -> list[str]:
        """Flush Python and C stdio buffers; returns notes about flushes that failed."""
        notes = []
        for stream in {id(s): s for s in (sys.stdout, sys.stderr, *self.wrappers)}.values():
            try:
                if stream is not None and not getattr(stream, "closed", False):
                    stream.flush()
            except Exception as exc:  # the user's own replacement stream; reported, not hidden
                notes.append(f"[sandbox: flushing {stream!r} failed: {_one_line(exc)}]\n")
        import ctypes  # imported on first use only: keeps start-up fast

        ctypes.CDLL(None).fflush(None)  # C-level printf output sits in libc's buffer
        return notes


def _run_cell(code: str, namespace: dict[str, Any], cell: int) -> None:
    """Execute ``code``; like Jupyter, a final bare expression's repr is printed."""
    filename = f"<cell {cell}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if isinstance(last, ast.Expr):
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            print(repr(value))


def _set_dumpable(on: bool) -> None:
    """PR_SET_DUMPABLE: off makes /proc/<pid>/fd, mem and tracing root-only (the supervisor); on
    lets the kernel's code read its own /proc entries (core dumps stay off: RLIMIT_CORE 0)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 1 if on else 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _serve_cells(requests: int, replies: int) -> int:
    """The kernel's loop: run each requested cell in one persistent namespace, reply, repeat."""
    streams = _Streams()
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    home = os.getcwd()
    while (request := read_frame(requests)) is not None:
        streams.reset()
        reply: dict[str, Any] = {"id": request["id"], "ok": True, "error": None, "traceback": ""}
        try:
            os.chdir(home)  # the working-directory contract holds even after a cell's os.chdir
            _run_cell(request["code"], namespace, request["id"])
        except BaseException as exc:  # SystemExit/KeyboardInterrupt are the cell's errors too
            reply.update(ok=False, error=_one_line(exc), traceback=_user_traceback(exc))
        notes = streams.flush()
        streams.reset()
        reply["traceback"] = "".join(notes) + reply["traceback"]
        write_frame(replies, reply)
    return 0


def _earlier(frame_id: object, cell: int) -> bool:
    return isinstance(frame_id, int) and not isinstance(frame_id, bool) and frame_id < cell


def reply_problem(frame: dict[str, Any], cell: Any) -> str | None:
    """Why ``frame`` is not the kernel's reply to ``cell``; None when it is one."""
    if frame.get("id") != cell or isinstance(frame.get("id"), bool):
        return f"a frame for cell {frame.get('id')!r} during cell {cell}"
    if not isinstance(frame.get("ok"), bool):
        return "a frame without a boolean 'ok'"
    if frame.get("error") is not None and not isinstance(frame.get("error"), str):
        return "a frame whose 'error' is not text"
    if not isinstance(frame.get("traceback"), str):
        return "a frame whose 'traceback' is not text"
    if set(frame) - {"id", "ok", "error", "traceback"}:
        return "a frame with unknown fields"
    return None


class _Kernel:
    """The supervisor's handle on one kernel process: its pid and its end of the pipe pair."""

    def __init__(self, host_fds: tuple[int, int]) -> None:
        self.host_in = host_fds[0]
        requests_r, self.requests = os.pipe()  # non-inheritable: the code's subprocesses never get them
        self.replies, replies_w = os.pipe()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # _reap_adopted must know it first
        self.pid = os.fork()
        if self.pid:
            _kernels.add(self.pid)
        else:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the code's own children are its own
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        if self.pid == 0:  # the kernel: nothing of the supervisor's but its own pipe ends
            code = 70
            try:
                for fd in (*host_fds, self.requests, self.replies):
                    os.close(fd)
                sys.argv = sys.argv[:1]  # the host's fd numbers meant nothing here anyway
                import ctypes

                ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
                _set_dumpable(True)
                code = _serve_cells(requests_r, replies_w)
            finally:
                os._exit(code)
        os.close(requests_r)
        os.close(replies_w)
        self.buffer = bytearray()
        self.status: int | None = None

    def poll(self) -> int | None:
        """The kernel's exit status once it died (exit code, or minus the signal), else None."""
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._reaped(status)
        return self.status

    def _reaped(self, status: int) -> None:
        self.status = os.waitstatus_to_exitcode(status)
        _kernels.discard(self.pid)
        if os.getpid() == 1:  # orphans that died while the kernel blocked the queue
            _reap_adopted()

    def stop(self) -> None:
        """Kill and reap the kernel (unless it is reaped already), close the pipes."""
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            self._wait_dead()
        os.close(self.requests)
        os.close(self.replies)

    def call(self, cell: int, code: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Run one cell: (reply, None), or (None, reset) when the kernel died or broke the channel;
        raises HostGone when the host closed its control pipe meanwhile."""
        try:
            write_frame(self.requests, {"id": cell, "code": code})
        except BrokenPipeError:
            return None, {"exit": self._wait_dead()}
        poller = select.poll()
        poller.register(self.replies, select.POLLIN)
        poller.register(self.host_in, 0)  # hang-up only: the host sends nothing during a call
        while True:
            events = dict(poller.poll(_POLL_S * 1000))
            if events.get(self.host_in, 0) & (select.POLLHUP | select.POLLERR):
                raise HostGone
            if self.replies not in events:
                status = self.poll()
                if status is not None:
                    return None, {"exit": status}
                continue
            data = os.read(self.replies, 1 << 16)
            if not data:  # every writer is gone: the kernel is exiting, or the code closed its end
                status = self._exit_within(1.0)
                return None, ({"exit": status} if status is not None
                              else {"channel": "the code closed the reply pipe"})
            self.buffer += data
            while True:  # every complete frame in the buffer, oldest first
                try:
                    frame = decode_frame(self.buffer)
                except ValueError as exc:
                    return None, {"channel": f"a malformed frame: {_clip(str(exc), 200)}"}
                if frame is None:
                    break
                problem = reply_problem(frame, cell)
                if problem is None:
                    return frame, None  # bytes after it wait for the next call, under the same rules
                if reply_problem(frame, frame.get("id")) is None and _earlier(frame["id"], cell):
                    continue  # a late real reply to a call a forged reply answered
                return None, {"channel": problem}

    def _exit_within(self, seconds: float) -> int | None:
        """The exit status if the kernel ends within ``seconds``, else None."""
        for _ in range(max(1, int(seconds / 0.01))):
            if self.poll() is not None:
                return self.status
            time.sleep(0.01)
        return self.poll()

    def _wait_dead(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        self._reaped(status)
        assert self.status is not None
        return self.status


def _supervise(host_fds: tuple[int, int], kernel: _Kernel) -> int:
    """Serve the host's requests through ``kernel``, replacing it whenever it dies or misbehaves."""
    ctl_in, ctl_out = host_fds
    while (request := read_frame(ctl_in)) is not None:
        reset_before: dict[str, Any] | None = None
        status = kernel.poll()
        if status is not None:
            reset_before = {"exit": status}
            kernel.stop()
            kernel = _Kernel(host_fds)
        try:
            reply, failure = kernel.call(request["id"], request["code"])
        except HostGone:
            break
        if failure is not None:
            kernel.stop()
            kernel = _Kernel(host_fds)
            reply = {"id": request["id"], "ok": False, "error": None, "traceback": ""}
        assert reply is not None
        write_frame(ctl_out, {**reply, "reset_before": reset_before, "failure": failure})
    kernel.stop()
    return 0


def _add_site(state: dict[str, Any]) -> None:
    """Started with ``-S``: what ``site`` would have set up, from the host (``path``: the
    site-packages directories, whose ``.pth`` files are not run; a venv's ``prefix`` and
    ``exec_prefix``), and the builtins ``site`` adds (``exit``, ``quit``, ``help``, ``copyright``)."""
    import site  # importing it does not run it under -S

    sys.path.extend(d for d in state["path"] if d not in sys.path)
    sys.prefix, sys.exec_prefix = state["prefix"], state["exec_prefix"]
    site.setquit()
    site.setcopyright()
    site.sethelper()


def main(argv: list[str]) -> int:
    """Confine this process, start the kernel, then supervise until the host closes the pipe."""
    ctl_in, ctl_out, limits = int(argv[1]), int(argv[2]), json.loads(argv[3])
    setup: dict[str, Any] = json.loads(argv[4]) if len(argv) > 4 else {}
    if setup.get("parent") is not None:
        _die_with_parent(setup["parent"])
    close_other_fds([ctl_in, ctl_out])
    os.set_inheritable(ctl_in, False)  # code's subprocesses must not get the control pipes
    os.set_inheritable(ctl_out, False)
    _confine(setup, (ctl_in, ctl_out))
    if "site" in setup:
        _add_site(setup["site"])
    return serve((ctl_in, ctl_out), limits, setup)


def serve(ctl_fds: tuple[int, int], limits: dict[str, int], setup: dict[str, Any]) -> int:
    """Set the rlimits, drop to uid 65534, enter the working directory, install the seccomp
    filter, then start the kernel and supervise it until the host closes the pipe.

    The last steps of every start: ``main`` calls it in a worker started as a program, the fork
    server (``zygote.py``) in a worker it forked, once that one has its namespaces.
    """
    ctl_in, ctl_out = ctl_fds
    _set_limits(limits)
    if setup.get("drop"):
        _drop_privileges()
    if setup.get("chdir"):
        os.chdir(setup["chdir"])
    if setup.get("seccomp"):
        _install_seccomp(setup["seccomp"])
    sys.dont_write_bytecode = True
    if setup.get("tracker"):  # image-region tracking (region_tracker.py): kernels inherit it by fork
        exec(compile(setup["tracker"], "<vtb region tracker>", "exec"), {"__name__": "__vtb_region_tracker__"})
    if os.getpid() == 1:  # bwrap's --as-pid-1: orphans of the code are ours to reap
        signal.signal(signal.SIGCHLD, _reap_adopted)
    kernel = _Kernel((ctl_in, ctl_out))
    _set_dumpable(False)  # from here on, no process of the sandbox can open or trace ours
    write_frame(ctl_out, {"op": "ready", "pid": os.getpid(), "uid": os.getuid(),
                          "isolation": setup.get("level", "process"),
                          "seccomp": bool(setup.get("seccomp"))})
    return _supervise((ctl_in, ctl_out), kernel)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
