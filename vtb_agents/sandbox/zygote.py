"""The fork server ("zygote"): one confined process that forks every sandbox worker ready-made.

Started by ``forkserver.py`` inside bubblewrap as ``python -I -S -B zygote.py SOCKET_FD SETUP_JSON``,
next to ``worker.py`` and ``isolation.py`` (standard library only, plus the modules it preloads).
Its bwrap root is the workers' (``isolation.bwrap_args``) with an empty ``/sandbox`` and no task's
folder: the zygote never sees a task's files, never runs model code, and never receives anything
from a task. Once started it imports what code cells import (``setup["preload"]``: PIL, NumPy,
OpenCV), freezes its heap (``gc.freeze``: children do not rewrite the pages of those objects to
collect them) and waits for the host's requests on ``SOCKET_FD`` (a ``SOCK_SEQPACKET`` socket).

Request: one message of JSON ``{"limits": ..., "setup": ..., "tmp_bytes": n}`` carrying six fds
(``SCM_RIGHTS``): the worker's control-in and control-out pipe ends, its stdout and stderr pipe
write ends, a detached mount of the task's working directory (``open_tree(OPEN_TREE_CLONE)``, made
by the host) and the task's status socket. The zygote forks the task's first process (C1), maps
its user namespace (ns uid/gid 0 and 65534 to the same ids outside, as bwrap's handshake does for a
worker it starts) and replies ``{"ok": true}`` or ``{"ok": false, "error": ...}``; it keeps none
of the fds. Then, with no further help from the zygote:

- C1 has its own user namespace; says hello on the status socket (the host learns its pid from
  the socket's credentials and moves it into the task's memory cgroup), waits for the go,
  unshares mount, pid, network, ipc, uts and cgroup namespaces, makes every mount private, mounts
  a fresh size-capped ``/tmp`` and ``/dev/shm`` and binds back on top of them, read-only, the
  Python roots that live there (``setup["keep"]``: a venv under /tmp; opened before the mounts hide
  them, ``isolation.cover_and_bind_back``), mounts its own ``/dev/pts`` instance, moves the
  task's folder onto ``/sandbox``, brings the loopback up, forks C2 and exits (one process less
  per waiting task).
- C2 is pid 1 of the task's pid namespace (adopted by the zygote, pid 1 of its own, which reaps it): leads the
  task's session and process group, says hello in turn (the host's handle on the task is this
  pid), mounts that namespace's ``/proc`` over the zygote's (code sees no other task's
  processes), forks C3, reaps, and sends C3's end on the status socket (4 bytes, big-endian,
  signal n as 128 + n); when it dies the kernel kills every process of the task.
- C3 is the worker proper: ``worker.serve`` sets the rlimits, drops to uid 65534 (no capabilities
  left), enters ``/sandbox``, installs the seccomp filter and starts the kernel that runs cells.

Sibling tasks share nothing writable: each has its own user, mount, pid, network (so its loopback
and abstract sockets), ipc and uts namespaces, its own ``/tmp``, ``/dev/shm``, ``/dev/pts`` and
``/proc`` (the root and all else are root's, read-only to uid 65534), and the zygote's mounts
below them are locked in each task's user namespace (they can be covered, not removed);
RLIMIT_NPROC counts per task (its own user namespace).

The zygote is pid 1 of bwrap's pid namespace (``--as-pid-1``) and dies with its host: it exits
when the host's end of its socket closes (the host's death closes it; no other process holds it:
``forkserver._forget_after_fork``), and its death kills every task's processes, which live in pid
namespaces below its own.
"""

from __future__ import annotations

import array
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import isolation  # noqa: E402  (bound next to this file, standard library only)
import worker  # noqa: E402
from zygote_protocol import FDS, GO, HELLO, STATUS  # noqa: E402

del sys.path[0]  # code cells must not import these by name

_NEWCGROUP = 0x02000000
_MOVE_MOUNT_F_EMPTY_PATH = 4
_AT_FDCWD = -100
_SYS_MOVE_MOUNT = {"x86_64": 429, "aarch64": 429}
_MNT_DETACH = 2
_HANDSHAKE_S = 10.0
_keep: list[str] = []
"""Python roots under the private /tmp and /dev/shm, bound back in every task (``setup["keep"]``)."""
_libc = ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args: object) -> None:
    isolation._libc_call(_libc, name, *args)


def _uncover_proc() -> None:
    """Remove bwrap's read-only binds over parts of ``/proc`` (``/proc/irq``, ``/proc/bus``...):
    a task's own user namespace may mount its ``/proc`` only where a proc mount is fully visible
    (the kernel's ``mount_too_revealing``). Each task's ``/proc`` is its own, over this one."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [line.split()[4] for line in handle]
    for path in sorted({p for p in points if p.startswith("/proc/")}, key=len, reverse=True):
        if _libc.umount2(path.encode(), _MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount {path}: {os.strerror(err)}")


def _preload(modules: list[str]) -> list[str]:
    """Import ``modules`` (those not installed are skipped); the names imported."""
    done = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        done.append(name)
    return done


def _reap(*_: object) -> None:
    """SIGCHLD: reap every task's C1 that ended (after forking its C2), and every C2 (adopted)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _exit_status(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _send_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_byte(fd: int, timeout: float) -> bytes:
    if not select.select([fd], [], [], timeout)[0]:
        raise TimeoutError("no answer within the handshake's time")
    return os.read(fd, 1)


def _task_pid1(fds: list[int], status: socket.socket, setup: dict[str, Any], limits: dict[str, int]) -> None:
    """C2: pid 1 of the task's pid namespace; forks the worker proper (C3), reaps, and sends C3's
    end on the status socket (code, as uid 65534, can neither signal nor open the fds of this
    process, which is ns root)."""
    ctl_in, ctl_out, out_w, err_w = fds
    os.setsid()  # leads the task's process group: the host ends the task with killpg
    status.sendall(HELLO)  # the host's handle: this process's pid, from the credentials
    _call("mount", b"proc", b"/proc", b"proc", isolation._NOSUID | isolation._NODEV | isolation._NOEXEC, None)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if child := os.fork():
        for fd in (ctl_in, ctl_out, out_w, err_w):
            os.close(fd)
        gc.disable()
        while True:
            pid, code = os.wait()
            if pid == child:
                status.sendall(STATUS.pack(_exit_status(code)))
                os._exit(0)
    status.close()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (null, out_w, err_w):
        if fd > 2:
            os.close(fd)
    keep = sorted((ctl_in, ctl_out))
    os.closerange(3, keep[0])
    os.closerange(keep[0] + 1, keep[1])
    os.closerange(keep[1] + 1, 1 << 16)
    os.set_inheritable(ctl_in, False)
    os.set_inheritable(ctl_out, False)
    sys.argv = sys.argv[:1]
    os._exit(worker.serve((ctl_in, ctl_out), limits, setup))


def _task(request: dict[str, Any], fds: list[int], handshake: tuple[int, int]) -> None:
    """C1: the task's namespaces and mounts, then C2 (pid 1 of its pid namespace); then C1 exits."""
    ctl_in, ctl_out, out_w, err_w, tree, status_fd = fds
    ready_w, go_r = handshake
    os.dup2(err_w, 2)  # a failure to confine is the worker's start error, shown by the host
    _call("prctl", 1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: dies with the zygote
    _call("unshare", isolation._NEWUSER)
    _send_all(ready_w, b"u")  # the zygote writes our uid and gid maps
    if _read_byte(go_r, _HANDSHAKE_S) != b"m":
        raise RuntimeError("the fork server did not map the task's user namespace")
    os.close(ready_w)
    os.close(go_r)
    status = socket.socket(fileno=status_fd)
    status.sendall(HELLO)  # the host reads our pid from the credentials and sets our cgroup
    status.settimeout(_HANDSHAKE_S)
    if status.recv(1) != GO:
        raise RuntimeError("the host did not let the task start")
    status.settimeout(None)
    _call("unshare", isolation._NEWNS | isolation._NEWPID | isolation._NEWNET | isolation._NEWIPC
          | isolation._NEWUTS | _NEWCGROUP)
    _call("mount", None, b"/", None, isolation._REC | isolation._PRIVATE, None)
    options = f"mode=1777,size={request['tmp_bytes']}"
    isolation.cover_and_bind_back(_libc, [(tmp, options) for tmp in isolation.PRIVATE_TMP],
                                  dict.fromkeys(_keep, True))
    _call("mount", b"devpts", b"/dev/pts", b"devpts", isolation._NOSUID | isolation._NOEXEC,
          b"newinstance,ptmxmode=0666,mode=620")  # ptys of its own: /dev/ptmx is bwrap's pts/ptmx link
    number = _SYS_MOVE_MOUNT[os.uname().machine]
    if _libc.syscall(number, tree, b"", _AT_FDCWD, isolation.INSIDE_WORKDIR.encode(), _MOVE_MOUNT_F_EMPTY_PATH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"move_mount of the working directory: {os.strerror(err)}")
    os.close(tree)
    isolation._loopback_up()
    socket.sethostname("sandbox")
    if os.fork() == 0:  # C2 outlives this process: the zygote (pid 1 of its namespace) adopts and reaps it
        _task_pid1([ctl_in, ctl_out, out_w, err_w], status, request["setup"], request["limits"])
    os._exit(0)


def _fork_task(host: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """Fork C1 for ``request`` and map its user namespace; the zygote keeps none of ``fds``."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            host.close()
            os.close(ready_r)
            os.close(go_w)
            if os.getppid() != zygote:
                os._exit(code)
            _task(request, fds, (ready_w, go_r))
        except BaseException as exc:
            os.write(2, f"[sandbox: the fork server's child could not confine itself: "
                        f"{type(exc).__name__}: {exc}]\n".encode("utf-8", "backslashreplace"))
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(go_r)
    try:
        if _read_byte(ready_r, _HANDSHAKE_S) != b"u":
            raise RuntimeError("the task's first process ended before its user namespace existed")
        for name, text in (("uid_map", "0 0 1\n65534 65534 1\n"), ("gid_map", "0 0 1\n65534 65534 1\n")):
            with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
        os.write(go_w, b"m")
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(ready_r)
        os.close(go_w)


def serve(host: socket.socket) -> int:
    """Answer the host's requests until it closes the socket."""
    while True:
        try:
            data, ancillary, _flags, _ = host.recvmsg(1 << 20, socket.CMSG_SPACE(FDS * 4))
        except InterruptedError:
            continue
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        if not data:
            return 0
        try:
            if len(fds) != FDS:
                raise ValueError(f"a request with {len(fds)} fds, not {FDS}")
            _fork_task(host, json.loads(data), list(fds))
            reply: dict[str, Any] = {"ok": True}
        except Exception as exc:  # the request fails, the server goes on: the host reports it
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        host.sendall(json.dumps(reply).encode())


def main(argv: list[str]) -> int:
    """Prepare the zygote (site, ``/proc``, preloads, frozen heap) and serve the host."""
    host = socket.socket(fileno=int(argv[1]))
    setup = json.loads(argv[2])
    worker.close_other_fds([host.fileno()])  # e.g. bwrap's info pipe: nothing for the tasks
    _keep[:] = setup.get("keep", [])
    if "site" in setup:
        worker._add_site(setup["site"])
    sys.dont_write_bytecode = True
    _uncover_proc()
    preloaded = _preload(setup.get("preload", []))
    gc.collect()
    gc.freeze()  # children leave these objects' pages shared: no collection walks them
    signal.signal(signal.SIGCHLD, _reap)
    host.sendall(json.dumps({"op": "ready", "preloaded": preloaded, "pid": os.getpid()}).encode())
    return serve(host)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
