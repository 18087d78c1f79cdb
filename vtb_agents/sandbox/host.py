"""Host-side plumbing of the local sandbox: working-directory scans and quotas, worker pipes.

The local backend (``local.py``) runs a worker process on this machine; this module watches its
working directory and speaks to it over pipes.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .output import CappedText
from .removal import remove_entries
from .walk import Visit, readable, walk_tree
from .worker import decode_frame, encode_frame

_CHUNK = 1 << 16
_DRAIN_S = 1.0


ENTRY_BYTES = 4096
"""What each directory entry counts towards a working-directory quota at least (its inode)."""


@dataclass
class TreeScan:
    """One look at a working directory: its regular files, its other entries, the bytes it holds.

    ``files`` maps relative names to ``(mtime_ns, size)``; ``others`` holds the relative names of
    directories, symlinks and special files; ``used_bytes`` counts each entry at least
    ``ENTRY_BYTES`` and a file at the larger of its size and its allocated blocks; ``unreadable``
    maps folders the host could not look into to why (code can take its permissions away).
    Relative names may be longer than ``PATH_MAX``: use them relative to the folder, name by name.
    """

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    others: set[str] = field(default_factory=set)
    used_bytes: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)

    def unreadable_message(self) -> str | None:
        """The error line for a call that left folders the host cannot read, or None."""
        if not self.unreadable:
            return None
        shown = "; ".join(f"{name!r} ({why})" for name, why in sorted(self.unreadable.items())[:3])
        more = f" and {len(self.unreadable) - 3} more" if len(self.unreadable) > 3 else ""
        return (f"the sandbox cannot read these folders of the working directory: {shown}{more}; "
                "their files are not listed: give them back read and search permission or remove them")


def scan_tree(root: Path) -> TreeScan:
    """Walk ``root`` once, never following symlinks, at any depth (``walk.walk_tree``).

    Entries that vanish while we look (code running in the background) are simply not listed;
    folders that cannot be opened or listed are in ``unreadable``, never an exception.
    """
    found = TreeScan()
    if not readable(root):  # the code took the working directory's own permissions away
        found.unreadable["."] = os.strerror(errno.EACCES)
        return found
    for visit in walk_tree(root):
        if visit.kind == "left":
            continue
        name, st = visit.relative, visit.info
        if visit.kind == "unreadable":
            found.unreadable[name] = (visit.error.strerror if visit.error is not None else None) or "unreadable"
        elif stat.S_ISREG(st.st_mode):
            found.files[name] = (st.st_mtime_ns, st.st_size)
        else:
            found.others.add(name)
        if visit.kind == "entry":
            found.used_bytes += max(ENTRY_BYTES, st.st_size, st.st_blocks * 512)
    return found


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """``{relative name: (mtime_ns, size)}`` of the regular files under ``root``."""
    return scan_tree(root).files


def changed_files(before: TreeScan, after: TreeScan) -> list[str]:
    """Regular files created or modified between two scans, sorted."""
    return sorted(k for k, v in after.files.items() if before.files.get(k) != v)


def remove_changes(root: Path, before: TreeScan) -> None:
    """Delete what appeared or changed under ``root`` since ``before``: new or modified files, new
    folders with all they hold, new symlinks and special files (``removal.remove_entries``).

    Used after a call that broke the working-directory quota; its worker is dead by then, so
    nothing writes concurrently. Raises ``RemovalError`` when something could not be removed.
    """
    def chosen(visit: Visit) -> bool:
        name, st = visit.relative, visit.info
        if stat.S_ISREG(st.st_mode):
            return before.files.get(name) != (st.st_mtime_ns, st.st_size)
        return name not in before.others

    remove_entries(root, chosen)


class WorkerProcess(Protocol):
    """The host's handle on a worker's process: one it started (:class:`SpawnedProcess`) or one
    the fork server forked (``forkserver.ForkedProcess``). ``pid`` leads the worker's process group."""

    pid: int

    def exit_status(self, wait_s: float) -> int | None:
        """The exit status once the worker has ended (minus n for signal n), else None after ``wait_s``."""

    def wait(self) -> None:
        """Until the process has ended and been reaped."""

    def kill(self) -> None:
        """SIGKILL the worker and every process of its sandbox (already gone: nothing to do)."""


class SpawnedProcess:
    """A worker started as a program: a child of this process (bwrap's outer process at that
    level, which leads its own session; its pid 1 is ``inner`` once known)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen, self.pid = popen, popen.pid
        self._inner: int | None = None

    def set_inner(self, pid: int) -> None:
        """bwrap's pid 1 (``isolation.bwrap_handshake``): :meth:`kill` kills it, and with it the
        sandbox's pid namespace (bwrap runs without ``--die-with-parent``: isolation.py)."""
        self._inner = os.pidfd_open(pid)

    def kill(self) -> None:
        if self._inner is not None:
            try:
                signal.pidfd_send_signal(self._inner, signal.SIGKILL)
            except ProcessLookupError:
                pass  # ended already
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the group is already gone

    def exit_status(self, wait_s: float) -> int | None:
        """The exit status once the worker has exited (not reaped yet), or None."""
        deadline = time.monotonic() + wait_s
        while True:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)

    def wait(self) -> None:
        self.popen.wait()
        if self._inner is not None:
            os.close(self._inner)
            self._inner = None


class WorkerPipes:
    """The host side of a worker's pipes: control frames in and out, stdout/stderr captured.

    A subclass starts ``proc`` and sets the fds (non-blocking) and the state attributes below.
    """

    proc: WorkerProcess
    ctl_w: int
    ctl_r: int
    out_r: int
    err_r: int
    open_outputs: set[int]
    inbox: bytearray
    outbox: bytes
    closed: bool

    @staticmethod
    def _close_fds(*fds: int) -> None:
        for fd in fds:
            os.close(fd)

    def exchange(self, request: dict[str, Any] | None, deadline: float, out: CappedText,
                 err: CappedText) -> tuple[str, dict[str, Any] | None]:
        """Send ``request`` and wait for one reply: ("reply", frame), ("timeout"|"eof"|"malformed", None).

        A frame over ``worker.MAX_FRAME`` or not a JSON object is "malformed": the host never
        buffers more than that, whatever arrives.

        ``request=None`` sends nothing new but goes on writing what an earlier call, stopped by
        its deadline, had not sent yet, so a caller can wait for one reply in slices.
        """
        if request is not None:
            self.outbox = encode_frame(request)
        captures: dict[int, CappedText | None] = {self.out_r: out, self.err_r: err}
        with selectors.DefaultSelector() as sel:
            sel.register(self.ctl_r, selectors.EVENT_READ)
            for fd in self.open_outputs:
                sel.register(fd, selectors.EVENT_READ)
            if self.outbox:
                sel.register(self.ctl_w, selectors.EVENT_WRITE)
            while True:
                try:
                    frame = decode_frame(self.inbox)
                except ValueError:
                    return "malformed", None
                if frame is not None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout", None
                for key, _ in sel.select(remaining):
                    if key.fd == self.ctl_w:
                        try:
                            self.outbox = self.outbox[os.write(self.ctl_w, self.outbox[:_CHUNK]):]
                        except BrokenPipeError:
                            return "eof", None
                        if not self.outbox:
                            sel.unregister(self.ctl_w)
                        continue
                    if key.fd != self.ctl_r:
                        self._read_output(sel, key.fd, captures)
                    elif data := os.read(self.ctl_r, _CHUNK):
                        self.inbox += data
                    else:
                        return "eof", None
            return "reply", frame

    def _read_output(self, sel: selectors.BaseSelector, fd: int,
                     captures: dict[int, CappedText | None]) -> None:
        """Move one chunk from an output pipe to its capture (None: discard)."""
        data = os.read(fd, _CHUNK)
        if not data:
            sel.unregister(fd)
            self.open_outputs.discard(fd)
        elif (capture := captures[fd]) is not None:
            capture.feed(data)

    def drain(self, out: CappedText | None, err: CappedText | None, to_eof: bool) -> None:
        """Read what is in the output pipes (``to_eof``: until closed), for at most a second."""
        captures: dict[int, CappedText | None] = {self.out_r: out, self.err_r: err}
        deadline = time.monotonic() + _DRAIN_S
        with selectors.DefaultSelector() as sel:
            for fd in self.open_outputs:
                sel.register(fd, selectors.EVENT_READ)
            while self.open_outputs and (remaining := deadline - time.monotonic()) > 0:
                ready = sel.select(remaining if to_eof else 0)
                if not ready:
                    return
                for key, _ in ready:
                    self._read_output(sel, key.fd, captures)

    def exit_code(self, wait_s: float) -> int | None:
        """The exit status once the worker has exited, or None after ``wait_s``."""
        return self.proc.exit_status(wait_s)

    def kill(self, out: CappedText | None = None, err: CappedText | None = None) -> None:
        """Kill the whole process group, collect the last output, close the pipes. Idempotent."""
        if self.closed:
            return
        self.signal_group()
        self.proc.wait()
        self.drain(out, err, to_eof=True)
        self.closed = True
        self._close_fds(self.ctl_w, self.ctl_r, self.out_r, self.err_r)

    def signal_group(self) -> None:
        """SIGKILL the worker and its sandbox's processes (``WorkerProcess.kill``)."""
        self.proc.kill()

