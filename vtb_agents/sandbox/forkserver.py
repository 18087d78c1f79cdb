"""The host side of the sandbox's fork server: one zygote per host process forks every worker.

Why: a worker started as a program pays, on its task's path, an interpreter start and, at its
first cell, the imports of PIL, NumPy and OpenCV; 32 tasks starting at once share 2 cores for
that, and each worker holds its own copy of those modules. The zygote (``zygote.py``) is started
once per host process, under bubblewrap with the workers' own root and nothing of any task's,
imports them once, and forks each task's worker: the first code call then costs about what a warm
one does, and the pages of the interpreter and the libraries are shared by every worker (counted
once in PSS).

Each task still gets everything a worker started by bwrap has (``zygote.py`` says how): its own
user, mount, pid, network, ipc and uts namespaces, its working directory at ``/sandbox`` (a
detached mount the host makes with ``open_tree`` and hands over as an fd: the zygote itself never
has any task's folder mounted), private ``/tmp`` and ``/dev/shm``, its own ``/proc``, the memory
cgroup (the host moves the task's first process into it before anything else forks), rlimits,
uid 65534, the seccomp filter, the quota and timeouts of ``local.py``.

Available when bwrap works, the host runs as root (bwrap's uid handshake; ``open_tree`` needs
CAP_SYS_ADMIN) and the kernel has the new mount API (5.2); elsewhere ``LocalSandbox`` starts each
worker as a program, as before. ``$VTB_SANDBOX_FORK_SERVER=0`` turns it off. A zygote dies with
its host, however the host ends: it exits when the host's end of its socket closes, and its tasks
with it (isolation.py says why not ``--die-with-parent``); at exit it is closed (and killed
through bwrap's pid 1 if it does not end in time); a process forked from the host (a process
executor) starts its own. A zygote that dies makes the
sandboxes whose workers it held fail with ``SandboxError`` at their next call; new sandboxes get
a new zygote.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import isolation as iso
from .base import SandboxError
from .limits import Limits
from .spawner import spawn
from .zygote_protocol import FDS, GO, HELLO, STATUS

if TYPE_CHECKING:
    from .cgroup import MemoryCgroup

ENV_VAR = "VTB_SANDBOX_FORK_SERVER"
PRELOAD = ("PIL.Image", "PIL.ImageOps", "PIL.ImageEnhance", "PIL.ImageFilter", "PIL.ImageDraw",
           "numpy", "cv2")
"""Modules the zygote imports once for every worker (those not installed are skipped)."""
INSIDE_DIR = "/run/vtb-sandbox"
_HERE = Path(__file__).parent
_FILES = ("zygote.py", "zygote_protocol.py", "worker.py", "isolation.py")
_OPEN_TREE, _OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 428, 1, 0o2000000
_log = logging.getLogger(__name__)
_libc = ctypes.CDLL(None, use_errno=True)


def detached_tree(path: Path) -> int:
    """An fd of a detached bind mount of ``path`` (``open_tree(OPEN_TREE_CLONE)``): what the
    task's first process mounts at ``/sandbox``; OSError where the kernel or our rights refuse."""
    fd = _libc.syscall(_OPEN_TREE, -100, str(path).encode(), _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"open_tree({str(path)!r}): {os.strerror(err)}")
    return int(fd)


def wanted(level: str) -> bool:
    """Whether sandboxes at ``level`` start their workers through a fork server here (by default)."""
    return (level == "bwrap" and iso.drops_uid() and os.environ.get(ENV_VAR, "1") != "0"
            and os.uname().machine in ("x86_64", "aarch64") and _unavailable is None)


class ForkedProcess:
    """The host's handle on a forked worker: the task's pid 1 (``zygote.py``'s C2), which leads
    the task's process group and reports the worker's end on the status socket."""

    def kill(self) -> None:
        """SIGKILL the task's process group (its pid 1 dying ends the task's pid namespace)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the group is already gone

    def __init__(self, pid: int, status: socket.socket, server: ForkServer) -> None:
        self.pid, self.server, self._status = pid, server, status
        self._pidfd = os.pidfd_open(pid)
        self._code: int | None = None

    def exit_status(self, wait_s: float) -> int | None:
        """The worker's exit status once it ended (signal n: 128 + n, minus n when the task's
        pid 1 was killed), else None after ``wait_s``."""
        if self._code is None and select.select([self._status], [], [], max(wait_s, 0))[0]:
            data = self._status.recv(STATUS.size)
            self._code = STATUS.unpack(data)[0] if len(data) == STATUS.size else -signal.SIGKILL
        return self._code

    def wait(self) -> None:
        """Until the task's pid 1 has ended and been reaped (by the zygote, which adopted it)."""
        self.exit_status(30.0)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            try:
                signal.pidfd_send_signal(self._pidfd, 0)
            except ProcessLookupError:
                break
            time.sleep(0.001)
        self._status.close()
        os.close(self._pidfd)


class ForkServer:
    """One zygote (``zygote.py``) under bubblewrap and the socket to it."""

    def __init__(self, python: str, site: dict[str, Any] | None, env: dict[str, str],
                 start_timeout: float = 60.0) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError("bubblewrap (bwrap) is not installed")
        self.python = python
        self._lock = threading.Lock()
        self._broken: str | None = None
        os.close(detached_tree(Path(tempfile.gettempdir())))  # the kernel and our rights allow it
        self._socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the zygote's stderr, read if it fails to start; open as long as the server (closed by close())
        self._log: IO[bytes] = tempfile.TemporaryFile(prefix="vtb-zygote-")  # noqa: SIM115
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        files = {f"{INSIDE_DIR}/{name}": str(_HERE / name) for name in _FILES}
        roots = iso.python_roots(python)
        options, data_fds = iso.bwrap_args(roots, files, None, env, 1 << 20, info_w, block_r,
                                           extra_caps=("CAP_SYS_ADMIN", "CAP_SETFCAP"))
        # roots the tasks' own /tmp and /dev/shm would hide: each task binds them back
        setup: dict[str, Any] = {"preload": list(PRELOAD), "keep": iso.under(roots, iso.PRIVATE_TMP)}
        if site is not None:
            setup["site"] = site
        command = [python, "-I", "-B", *(["-S"] if site is not None else []),
                   f"{INSIDE_DIR}/zygote.py", str(theirs.fileno()), json.dumps(setup)]
        args_fd = iso.args_pipe(options)
        # info_r too: bwrap's report of its pid 1 must not die of SIGPIPE if the host is gone
        child_fds = (theirs.fileno(), info_w, info_r, block_r, args_fd, *data_fds)
        try:
            self.proc = spawn(lambda: subprocess.Popen(
                [bwrap, "--args", str(args_fd), "--", *command], cwd="/", env={},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
                pass_fds=child_fds, start_new_session=True))
        except BaseException:
            self._socket.close()
            raise
        finally:
            theirs.close()
            for fd in (info_w, block_r, args_fd, *data_fds):
                os.close(fd)
        self._inner: int | None = None  # a pidfd of the zygote (bwrap's pid 1): its death ends every task
        try:
            self._inner = os.pidfd_open(iso.bwrap_handshake(info_r, block_w, time.monotonic() + start_timeout))
            self._socket.settimeout(start_timeout)
            ready = self._receive()
        except (OSError, RuntimeError, ValueError) as exc:
            self._end()
            raise SandboxError(f"the sandbox's fork server did not start: {exc}; its stderr: "
                               f"{self._stderr()}") from exc
        finally:
            os.close(info_r)
            os.close(block_w)
        self.pid, self.preloaded = self.proc.pid, ready["preloaded"]

    def _receive(self) -> dict[str, Any]:
        data = self._socket.recv(1 << 16)
        if not data:
            raise RuntimeError(f"the fork server ended ({self.death()})")
        reply = json.loads(data)
        if not isinstance(reply, dict):
            raise ValueError("the fork server sent something other than a JSON object")
        return reply

    def _stderr(self) -> str:
        """The end of what the zygote (and bwrap) wrote to stderr (once it has ended); closes the log."""
        self._log.seek(0)
        text = self._log.read()[-4000:].decode("utf-8", "replace")
        self._log.close()
        return text

    def alive(self) -> bool:
        """Whether the zygote is still running and its socket in step (no request left unanswered)."""
        return self._broken is None and self.proc.poll() is None

    def death(self) -> str:
        """How the zygote ended, or why it is no longer used, for messages."""
        code = self.proc.poll()
        return self._broken or ("still running" if code is None else f"exit status {code}")

    def fork(self, workdir: Path, fds: list[int], limits: Limits, setup: dict[str, Any],
             cgroup: MemoryCgroup | None, deadline: float) -> ForkedProcess:
        """Fork a worker for ``workdir`` with ``fds`` (ctl in, ctl out, stdout, stderr: the
        child's ends, which the caller closes); its first process joins ``cgroup`` before any
        other starts. Raises SandboxError when the zygote is gone, OSError when the fork fails."""
        if len(fds) != FDS - 2:
            raise ValueError(f"a worker needs {FDS - 2} fds (ctl in, ctl out, stdout, stderr), not {len(fds)}")
        tree = detached_tree(workdir)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            request = json.dumps({"limits": asdict(limits), "setup": setup,
                                  "tmp_bytes": limits.tmp_bytes}).encode()
            with self._lock:
                if not self.alive():
                    raise SandboxError(f"the sandbox's fork server has ended ({self.death()})")
                self._socket.settimeout(max(deadline - time.monotonic(), 0.001))
                try:
                    socket.send_fds(self._socket, [request], [*fds, tree, theirs.fileno()])
                    reply = self._receive()
                except (OSError, RuntimeError, ValueError) as exc:  # a late answer would answer the next
                    self._broken = f"it did not answer a request: {type(exc).__name__}: {exc}"
                    raise SandboxError(f"the sandbox's fork server did not answer: {exc}") from exc
            if not reply.get("ok"):
                raise OSError(f"the fork server could not fork a worker: {reply.get('error')}")
            theirs.close()
            first = self._hello(ours, deadline)
            if cgroup is not None:
                cgroup.add(first)
            ours.sendall(GO)
            return ForkedProcess(self._hello(ours, deadline), ours, self)  # the task's pid 1
        except BaseException:
            ours.close()
            raise
        finally:
            os.close(tree)
            if theirs.fileno() >= 0:
                theirs.close()

    @staticmethod
    def _hello(status: socket.socket, deadline: float) -> int:
        """The host pid of the task's process that said hello, from the socket's credentials."""
        status.settimeout(max(deadline - time.monotonic(), 0.001))
        data, ancillary, _flags, _ = status.recvmsg(16, socket.CMSG_SPACE(12))
        status.settimeout(None)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and data == HELLO:
                return int(array.array("i", payload[:4])[0])
        raise OSError("the worker's process did not say hello (it could not confine itself; "
                      "see its stderr)")

    def close(self) -> None:
        """End the zygote (closing its socket; then SIGKILL) and wait for it; idempotent."""
        self._end()
        if not self._log.closed:
            self._log.close()

    def _end(self) -> None:
        """Close the socket (the zygote exits at its end) and wait for bwrap; after 5 s, SIGKILL
        the zygote, pid 1 of bwrap's pid namespace (every task's with it), then bwrap.

        bwrap's outer process exits only once its pid 1 (the zygote, ``--as-pid-1``) is gone, and
        the kernel releases a pid namespace's processes before its pid 1's end is reported: when
        this returns, no process of the zygote or of any task it forked is left. (With bwrap's own
        init as pid 1, the outer process reported the zygote's exit at once, while that init,
        killed by its parent-death signal, and the tasks were still dying: a loaded machine saw
        them after ``close``; killing the outer process first would return early the same way.)"""
        self._socket.close()
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            if self._inner is not None:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    signal.pidfd_send_signal(self._inner, signal.SIGKILL)
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:  # its pid 1 was not known, or bwrap is stuck
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._inner is not None:
            os.close(self._inner)
            self._inner = None


_servers: dict[str, ForkServer] = {}
_servers_lock = threading.Lock()
_unavailable: str | None = None


def fork_server(python: str, site: dict[str, Any] | None, env: dict[str, str]) -> ForkServer:
    """This process's fork server for ``python``: started on first use, and again after one died
    (the old one stays until this process ends: workers it forked may still be running). Raises
    SandboxError when none can start here; :func:`unavailable` then says why."""
    global _unavailable
    with _servers_lock:
        server = _servers.get(python)
        if server is None or not server.alive():
            try:
                server = _servers[python] = ForkServer(python, site, env)
            except (SandboxError, OSError) as exc:
                _unavailable = f"{type(exc).__name__}: {exc}"
                raise SandboxError(f"the sandbox's fork server cannot start here: {exc}") from exc
        return server


def unavailable() -> str | None:
    """Why a fork server could not start in this process (then sandboxes start their workers as
    programs, unless they asked for one), or None."""
    return _unavailable


@atexit.register
def close_all() -> None:
    """Close this process's fork servers (at exit; tests call it too)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()


def _forget_after_fork() -> None:
    """A forked child (e.g. a process executor's) starts fork servers of its own; the parent's
    sockets are closed here, so only the parent can end its zygote."""
    global _servers_lock
    for server in _servers.values():
        server._socket.close()
    _servers.clear()
    _servers_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
