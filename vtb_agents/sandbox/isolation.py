"""Isolation levels of the local sandbox and how each one is set up.

The level actually achieved is ``LocalSandbox.isolation`` (runs record it):

``"bwrap"`` bubblewrap wraps the worker: new user, pid, network (loopback only), ipc, uts and
    cgroup namespaces, ``--new-session``. Its root is a fresh tmpfs holding
    only /usr (and /bin, /sbin, /lib* as symlinks or read-only binds), /etc/ld.so.cache,
    /etc/localtime, /etc/alternatives, a two-line /etc/passwd and /etc/group, the Python install
    (read-only at its real paths: the venv and its base prefix, not the project around the venv),
    the worker script, a fresh /proc, a minimal /dev, private size-capped /tmp and /dev/shm (an
    install that lives under them, e.g. a venv in /tmp, is bound back on top, read-only, and
    nothing else of the host's), and the working directory (read-write at ``/sandbox``: cwd and
    HOME). Environment cleared. When the host
    runs as root the worker runs as uid/gid 65534, a real host uid: a uid-map handshake (ns uid 0
    -> 0 for setup, 65534 -> 65534), not bwrap's ``--uid 65534``, which maps to host root where
    RLIMIT_NPROC does not apply. NPROC then counts per sandbox (its own user namespace). Not
    reachable: host files, processes, network, environment.
``"fallback"`` no usable bwrap: the worker confines itself with ctypes ``unshare`` (util-linux
    ``unshare -n`` would only give the network): new mount, network (loopback only), ipc, uts and
    pid namespaces (and a user namespace when not root), a fresh /proc, private size-capped /tmp,
    /var/tmp and /dev/shm, tmpfs over /root, /home, /run/user, the project directory around the
    venv and any directory uid 65534 cannot enter, the Python install and the worker bound back
    read-only, then uid/gid 65534 when root. The rest of the host file system stays visible with
    its permissions: world-readable files can be read (e.g. /etc/passwd), root's cannot be written.
    As root RLIMIT_NPROC counts every uid-65534 process of the host (no user namespace).
``"process"`` a plain worker process in its own session, scrubbed environment, rlimits (no NPROC).
    No namespaces: the host user's files, network and processes are reachable. Debugging only.

All levels keep the persistent worker, which dies with the host however the host ends. Under bwrap
that is not ``--die-with-parent``: bwrap sets ``PR_SET_PDEATHSIG`` in its outer process before the
uid-map handshake but in its child only after it, so a host killed in between took the outer
process along and left the child blocked for good, re-parented to pid 1. Instead the worker (or
the fork server) is itself pid 1 of the sandbox's pid namespace (``--as-pid-1``: no bwrap init
that outlives it), so its end kills every process of the sandbox, and it ends when the host's end
of its channel closes (the worker's supervisor watches its control pipe even while a cell runs;
the fork server its socket); bwrap is given a read end of its info pipe (its report never meets a
closed pipe) and a setup the host never finished fails at once (no uid map). The host ends a
sandbox by killing that pid 1 (``child-pid`` of ``--info-fd``). The fallback and process levels use the worker's own
``PR_SET_PDEATHSIG`` (then a check that the host is still its parent). Also kept: the per-call
wall-clock timeout, capped output, rlimits
on address space, CPU seconds and file size, and the working-directory quota (``Limits``); where
the machine allows a cgroup (``cgroup.py``), the memory of all the worker's processes together is
capped too, and otherwise only per process (RLIMIT_AS); a seccomp filter (``seccomp.py``) denies
the system calls that lead into the kernel's riskier parts or out of a sandbox (x86_64 and
aarch64).

This file is also loaded by path inside the fallback worker: standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

LEVELS = ("bwrap", "fallback", "process")
CHOICES = ("auto", *LEVELS)
ENV_VAR = "VTB_SANDBOX_ISOLATION"
SANDBOX_ID = 65534
INSIDE_WORKDIR = "/sandbox"
INSIDE_WORKER = "/run/vtb-sandbox/worker.py"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives")
_MASKS = ("/tmp", "/var/tmp", "/dev/shm", "/root", "/home", "/run/user")
_TMP_MASKS = ("/tmp", "/var/tmp", "/dev/shm")
PRIVATE_TMP = ("/tmp", "/dev/shm")
"""Where a bwrap sandbox (worker or fork-server task) mounts fresh size-capped tmpfs of its own."""
_NOT_MASKABLE = {"/", "/usr", "/etc", "/opt", "/var", "/srv", "/mnt", "/proc", "/dev", "/sys"}
_probe_lock = threading.Lock()
_probe_errors: dict[tuple[str, str], str | None] = {}


def requested_level(option: str | None) -> str:
    """The level asked for: the option, else ``$VTB_SANDBOX_ISOLATION``, else ``"auto"``."""
    value = option if option is not None else os.environ.get(ENV_VAR, "auto")
    if value not in CHOICES:
        raise ValueError(f"isolation must be one of {', '.join(CHOICES)}, not {value!r}")
    return value


def probed(level: str, python: str, attempt: Callable[[], str | None]) -> str | None:
    """``attempt()`` (an error message or None) run once per process for (level, python)."""
    with _probe_lock:
        if (level, python) not in _probe_errors:
            _probe_errors[(level, python)] = attempt()
        return _probe_errors[(level, python)]


def drops_uid() -> bool:
    """True when the worker switches to uid/gid 65534 (the host runs as root)."""
    return os.geteuid() == 0


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those inside another one of them, sorted."""
    unique = sorted(set(paths))
    return [p for p in unique if not any(p != q and p.startswith(q.rstrip("/") + "/")
                                         for q in unique)]


def python_roots(python: str) -> list[str]:
    """Real directories the interpreter needs, wherever they live: its prefix (as given and with
    symlinks resolved), a venv's base prefix (``home`` in pyvenv.cfg, and where the interpreter
    there links to: a ``--copies`` venv of a symlinked install). Paths may hold spaces."""
    exe = os.path.abspath(python)
    prefix = os.path.dirname(os.path.dirname(exe))
    roots = {prefix, os.path.dirname(os.path.dirname(os.path.realpath(exe)))}
    cfg = os.path.join(prefix, "pyvenv.cfg")
    if os.path.isfile(cfg):
        with open(cfg, encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    home = value.strip()
                    roots.add(os.path.dirname(home))
                    base = os.path.realpath(os.path.join(home, os.path.basename(exe)))
                    roots.add(os.path.dirname(os.path.dirname(base)))
    if os.path.realpath(exe) == os.path.realpath(sys.executable):
        roots.update((sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix))
    return _outermost(r for r in {*roots, *(os.path.realpath(r) for r in roots)} if r != "/")


def under(paths: Iterable[str], tops: Iterable[str]) -> list[str]:
    """Those of ``paths`` equal to or inside one of ``tops``, sorted."""
    return sorted(p for p in set(paths) if any(p == t or p.startswith(t + "/") for t in tops))


def bwrap_args(python_dirs: list[str], files: dict[str, str], workdir: str | None,
               env: dict[str, str], tmp_bytes: int, info_fd: int, block_fd: int | None,
               extra_caps: tuple[str, ...] = ()) -> tuple[list[str], list[int]]:
    """bwrap options (before the command) and the fds they read (to pass to bwrap, then close).

    ``files`` maps paths inside to host files bound read-only (the worker script, or the fork
    server's scripts); ``workdir`` is bound read-write at ``INSIDE_WORKDIR``, or None for an
    empty directory there (the fork server, whose children mount their own). ``info_fd``: where
    bwrap writes its pid 1's host pid (see :func:`bwrap_handshake`); ``block_fd``: the userns
    block fd of the uid-map handshake, when root; ``extra_caps`` are kept besides CAP_SETUID and
    CAP_SETGID (the fork server's CAP_SYS_ADMIN). No ``--die-with-parent``: the module docstring
    says why and how the sandbox dies with the host instead. Python roots inside the private
    /tmp or /dev/shm are bound on top of them; a root that would cover one of them whole (a
    Python installed at ``/tmp``) is refused with ValueError.
    """
    for root in python_dirs:
        if covered := under(PRIVATE_TMP, [root.rstrip("/") or "/"]):
            raise ValueError(f"the Python install at {root!r} contains {covered[0]}, which the "
                             "sandbox keeps private: install Python in a folder of its own")
    args = ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--new-session", "--hostname", "sandbox", "--as-pid-1",
            "--info-fd", str(info_fd)]
    if block_fd is not None:  # the worker starts as ns-root with only these, then drops to 65534
        args += ["--userns-block-fd", str(block_fd), "--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", *extra_caps):
            args += ["--cap-add", cap]
    else:
        args += ["--disable-userns"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]  # implicit parents would be 0700
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    system = [p for p in _SYSTEM_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    roots = [d for d in _outermost(python_dirs)
             if not any(d == s or d.startswith(s + "/") for s in system)]
    parents = {os.path.dirname(p) for p in [*roots, *files]}
    ancestors = {a for p in parents for a in _ancestors(p)}
    args += ["--proc", "/proc", "--dev", "/dev"]
    for tmp in PRIVATE_TMP:  # /dev/shm: multiprocessing locks and pools
        args += ["--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", tmp]
    for directory in sorted(ancestors, key=lambda p: p.count("/")):
        args += ["--perms", "0755", "--dir", directory]
    for root in roots:
        args += ["--ro-bind", root, root]
    for inside, host in files.items():
        args += ["--ro-bind", host, inside]
    args += (["--bind", workdir, INSIDE_WORKDIR] if workdir is not None
             else ["--perms", "0755", "--dir", INSIDE_WORKDIR])
    args += ["--chdir", "/", "--clearenv"]  # the worker enters INSIDE_WORKDIR once it is uid 65534
    for key, value in env.items():
        args += ["--setenv", key, value]
    uid, gid = (SANDBOX_ID, SANDBOX_ID) if block_fd is not None else (os.getuid(), os.getgid())
    passwd = (f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
              f"sandbox:x:{uid}:{gid}:sandbox:{INSIDE_WORKDIR}:/usr/sbin/nologin\n")
    fds = [data_pipe(passwd.encode()), data_pipe(f"root:x:0:\nsandbox:x:{gid}:\n".encode())]
    args += ["--perms", "0644", "--ro-bind-data", str(fds[0]), "/etc/passwd",
             "--perms", "0644", "--ro-bind-data", str(fds[1]), "/etc/group"]
    return args, fds


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``['/a', '/a/b', '/a/b/c']`` (``/`` excluded)."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def args_pipe(args: list[str]) -> int:
    """A pipe read end holding bwrap options NUL-separated (``bwrap --args FD``: keeps the host
    paths of the binds out of the sandbox's /proc/1/cmdline)."""
    return data_pipe(b"".join(a.encode() + b"\0" for a in args))


def data_pipe(data: bytes) -> int:
    """The read end of a pipe holding ``data`` (written whole, write end closed)."""
    read_fd, write_fd = os.pipe()
    try:
        if len(data) > 60_000:  # stays within the pipe buffer: the write must not block
            raise ValueError(f"bwrap arguments too long ({len(data)} bytes)")
        os.write(write_fd, data)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd


def bwrap_handshake(info_fd: int, block_fd: int | None, deadline: float) -> int:
    """The host pid of bwrap's pid 1 (from ``--info-fd``); with ``block_fd`` (the host is root),
    first map ns uid 0 -> host 0 (setup only) and 65534 -> 65534, then let bwrap go on.

    Killing that pid ends the sandbox's whole pid namespace; bwrap's outer process then exits.
    """
    data = b""
    while not data.rstrip().endswith(b"}"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([info_fd], [], [], remaining)[0]:
            raise TimeoutError("bwrap did not report its child pid in time")
        chunk = os.read(info_fd, 4096)
        if not chunk:
            raise RuntimeError("bwrap exited during setup (see its stderr)")
        data += chunk
    pid = int(json.loads(data)["child-pid"])
    if block_fd is not None:
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as handle:
                handle.write(f"0 0 1\n{SANDBOX_ID} {SANDBOX_ID} 1\n")
        os.write(block_fd, b"1")
    return pid


def fallback_config(python_dirs: list[str], worker_dir: str, workdir: str,
                    tmp_bytes: int) -> dict[str, Any]:
    """What the fallback worker masks (tmpfs) and binds back (``keep``: path -> read-only?).

    The projects masked: the folder around the venv, both as reached and with symlinks resolved
    (a checkout whose ``.venv`` links to another checkout's venv), and the checkout holding the
    package's source (``worker_dir``'s grandparent), unless that lies in a Python root (a
    site-packages install). Only ``worker_dir`` of that checkout is bound back.
    """
    keep = {**{d: True for d in python_dirs}, worker_dir: True, workdir: False}
    masks = [m for m in _MASKS if os.path.isdir(m) and not os.path.islink(m)]
    projects = set()
    if sys.prefix != sys.base_prefix:
        projects |= {os.path.dirname(os.path.abspath(sys.prefix)),
                     os.path.dirname(os.path.realpath(sys.prefix))}
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(worker_dir)))
    if not under([checkout], python_dirs):
        projects |= {checkout, os.path.realpath(checkout)}
    masks += [p for p in projects
              if p not in _NOT_MASKABLE and os.path.isdir(p) and not os.path.islink(p)]
    if drops_uid():  # directories uid 65534 cannot traverse would hide what it needs
        masks += [a for path in keep for a in _ancestors(os.path.dirname(path))
                  if a not in _NOT_MASKABLE and not os.stat(a).st_mode & stat.S_IXOTH]
    return {"masks": _outermost(masks), "keep": keep, "tmp_bytes": tmp_bytes, "workdir": workdir,
            "drop": drops_uid()}


# ---- inside the fallback worker -------------------------------------------------------------
_NEWNS, _NEWUTS, _NEWIPC, _NEWUSER, _NEWPID, _NEWNET = (
    0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_RDONLY, _NOSUID, _NODEV, _NOEXEC, _REMOUNT, _BIND, _REC, _PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
_ATIME = {1024: 1024, 2048: 2048, 4096: 1 << 21}  # statvfs ST_*ATIME -> MS_*ATIME (locked flags)


def _libc_call(libc: ctypes.CDLL, name: str, *args: object) -> None:
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}{args!r}: {os.strerror(err)}")


def enter_fallback(cfg: dict[str, Any], ctl_fds: tuple[int, int]) -> None:
    """Confine this (single-threaded) worker; returns only in the confined grandchild.

    This process stays outside as the waiter; its child is pid 1 of the new pid namespace (reaps,
    and its death kills every process in it); the grandchild is the worker proper.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    flags = _NEWNS | _NEWNET | _NEWIPC | _NEWUTS | _NEWPID | (0 if cfg["drop"] else _NEWUSER)
    _libc_call(libc, "unshare", flags)
    if not cfg["drop"]:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
    if child := os.fork():
        _wait_and_mirror(child, ctl_fds)
    # PR_SET_PDEATHSIG (getppid() is 0 here, the parent being outside the pid namespace; if it
    # died already, the host kills this process group anyway)
    _libc_call(libc, "prctl", 1, signal.SIGKILL, 0, 0, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # pid 1 then ignores it from inside the namespace
    _mount_fallback(libc, cfg)
    _loopback_up()
    socket.sethostname("sandbox")
    if worker := os.fork():
        _wait_and_mirror(worker, ctl_fds)


def _mount_fallback(libc: ctypes.CDLL, cfg: dict[str, Any]) -> None:
    """Private mounts, fresh /proc, tmpfs masks, then the kept paths bound back."""
    _libc_call(libc, "mount", None, b"/", None, _REC | _PRIVATE, None)
    _libc_call(libc, "mount", b"proc", b"/proc", b"proc", _NOSUID | _NODEV | _NOEXEC, None)
    masks = []
    for mask in cfg["masks"]:
        tmp = mask in _TMP_MASKS
        masks.append((mask, f"mode={'1777' if tmp else '0755'},size={cfg['tmp_bytes'] if tmp else 1 << 20}"))
    cover_and_bind_back(libc, masks, cfg["keep"])
    os.chdir(cfg["workdir"])  # onto the bound copy, not the masked original


def cover_and_bind_back(libc: ctypes.CDLL, masks: list[tuple[str, str]], keep: dict[str, bool]) -> None:
    """Mount a tmpfs at each of ``masks`` (path, options), then bind each path of ``keep`` (path ->
    read-only?) back at its own path, on top: what the masks hid of it shows again, and nothing else.

    Each kept path is opened (``O_PATH``) before the masks are mounted and bound back recursively
    from that fd, with the folders above it made in the tmpfs (0755, whatever the umask); a
    read-only one is remounted read-only (keeping the flags a user namespace locks) and checked.
    Called in a fresh mount namespace (the fallback worker; each fork-server task).
    """
    fds = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in keep}
    try:
        for mask, options in masks:
            _libc_call(libc, "mount", b"tmpfs", mask.encode(), b"tmpfs", _NOSUID | _NODEV,
                       options.encode())
        for path, read_only in sorted(keep.items()):
            is_dir = stat.S_ISDIR(os.fstat(fds[path]).st_mode)
            _make_dirs(path if is_dir else os.path.dirname(path))
            if not is_dir and not os.path.exists(path):
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            _libc_call(libc, "mount", f"/proc/self/fd/{fds[path]}".encode(), path.encode(), None,
                       _BIND | _REC, None)
            if read_only:
                flag = os.statvfs(path).f_flag
                kept = flag & (_NOSUID | _NODEV | _NOEXEC)
                kept |= sum(v for k, v in _ATIME.items() if flag & k)
                _libc_call(libc, "mount", None, path.encode(), None,
                           _REMOUNT | _BIND | _RDONLY | _NOSUID | _NODEV | kept, None)
                if not os.statvfs(path).f_flag & os.ST_RDONLY:
                    raise OSError(f"{path} is still writable after its read-only bind")
    finally:
        for fd in fds.values():
            os.close(fd)


def _make_dirs(path: str) -> None:
    """``mkdir -p path``, each folder made 0755 (readable and searchable by uid 65534)."""
    for folder in _ancestors(path):
        if not os.path.isdir(folder):
            os.mkdir(folder)
            os.chmod(folder, 0o755)


def _loopback_up() -> None:
    """``ip link set lo up`` in the new network namespace (SIOCGIFFLAGS / SIOCSIFFLAGS)."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, 0x8913, request))[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))


def _wait_and_mirror(child: int, ctl_fds: tuple[int, int]) -> None:
    """Reap until ``child`` exits, then exit with its status (signal n: 128 + n); never returns."""
    for fd in ctl_fds:
        os.close(fd)  # only the worker proper may hold the control pipes (EOF tells the host)
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
