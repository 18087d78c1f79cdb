"""``LocalSandbox``: model-written code runs in a persistent Python worker subprocess.

Isolation level ``"process"``: the worker runs in its own session (its process group is killed on
timeout and close), with a scrubbed environment (no API keys), rlimits (memory, CPU, file size) and
the episode's working directory as cwd and HOME. There is no namespace isolation: the code can
still read the file system and use the network. ``worker_command`` is the one place to wrap the
launch (e.g. with bubblewrap) for full isolation later.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .base import DEFAULT_TIMEOUT_S, CappedText, ExecResult, relative_name
from .worker import decode_frame, encode_frame

WORKER_PATH = Path(__file__).with_name("worker.py")
_PASSTHROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")
_CHUNK = 1 << 16
_DRAIN_S = 1.0
_STATE_RESET = "the Python state was reset (variables and imports lost)"


class SandboxError(RuntimeError):
    """The sandbox itself failed (worker would not start, or the sandbox is closed)."""


@dataclass(frozen=True)
class Limits:
    """rlimits of the worker process (0 disables one).

    ``cpu_seconds`` is CPU time over the whole life of one worker (it restarts after a timeout or
    crash), not per call. RLIMIT_NPROC is deliberately absent: it counts processes per uid, so it
    means nothing as root or when the worker shares the parent's uid; leave it to the bwrap step.
    """

    address_space_bytes: int = 4 << 30
    cpu_seconds: int = 600
    file_size_bytes: int = 512 << 20


def worker_env(workdir: Path) -> dict[str, str]:
    """The worker's whole environment: a minimal set, nothing inherited that could be a secret."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
    }
    env.update({k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ})
    return env


def worker_command(python: str, ctl_in: int, ctl_out: int, limits: Limits) -> list[str]:
    """argv that starts the worker; ``-I`` ignores PYTHON* variables and the user site."""
    return [python, "-I", "-B", str(WORKER_PATH), str(ctl_in), str(ctl_out),
            json.dumps(asdict(limits))]


class _Worker:
    """One worker process with its control pipes and its stdout/stderr pipes."""

    def __init__(self, python: str, workdir: Path, limits: Limits, start_timeout: float) -> None:
        self.limits = limits
        ctl_in_r, self.ctl_w = os.pipe()   # parent -> worker
        self.ctl_r, ctl_out_w = os.pipe()  # worker -> parent
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                worker_command(python, ctl_in_r, ctl_out_w, limits), cwd=workdir,
                env=worker_env(workdir), stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                pass_fds=(ctl_in_r, ctl_out_w), start_new_session=True)
        except BaseException:
            self._close_fds(self.ctl_w, self.ctl_r, self.out_r, self.err_r)
            raise
        finally:
            self._close_fds(ctl_in_r, ctl_out_w, out_w, err_w)
        for fd in (self.ctl_w, self.ctl_r, self.out_r, self.err_r):
            os.set_blocking(fd, False)
        self.open_outputs = {self.out_r, self.err_r}
        self.inbox, self.outbox, self.closed = bytearray(), b"", False
        out, err = CappedText(), CappedText()
        status, frame = self.exchange(None, time.monotonic() + start_timeout, out, err)
        if status != "reply" or frame is None or frame.get("op") != "ready":
            self.kill(out, err)
            raise SandboxError(
                f"the sandbox worker did not start ({status}): {err.text()[-4000:]}")

    @staticmethod
    def _close_fds(*fds: int) -> None:
        for fd in fds:
            os.close(fd)

    def exchange(self, request: dict[str, Any] | None, deadline: float, out: CappedText,
                 err: CappedText) -> tuple[str, dict[str, Any] | None]:
        """Send ``request`` and wait for one reply: ("reply", frame), ("timeout"|"eof", None)."""
        self.outbox = encode_frame(request) if request is not None else b""
        captures: dict[int, CappedText | None] = {self.out_r: out, self.err_r: err}
        with selectors.DefaultSelector() as sel:
            sel.register(self.ctl_r, selectors.EVENT_READ)
            for fd in self.open_outputs:
                sel.register(fd, selectors.EVENT_READ)
            if self.outbox:
                sel.register(self.ctl_w, selectors.EVENT_WRITE)
            while (frame := decode_frame(self.inbox)) is None:
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
        """The exit status once the worker has exited (not reaped yet), or None."""
        deadline = time.monotonic() + wait_s
        while True:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)

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
        """SIGKILL the worker's process group (it leads its own session)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the group is already gone

    def death_message(self, code: int | None) -> str:
        """One line saying how the worker died."""
        if code is None:
            what = "the Python worker closed its control pipe"
        elif code >= 0:
            what = f"the Python worker exited with code {code} (os._exit or a crash)"
        else:
            sig = {s.value: s for s in signal.Signals}.get(-code)
            what = f"the Python worker was killed by {sig.name if sig else f'signal {-code}'}" + {
                signal.SIGXCPU: f" (CPU limit of {self.limits.cpu_seconds} s per worker reached)",
                signal.SIGKILL: " (possibly out of memory)",
                signal.SIGSEGV: " (crash in native code)",
            }.get(sig, "")
        return f"{what}; {_STATE_RESET}"


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """``{relative name: (mtime_ns, size)}`` of the regular files under ``root``.

    Entries that vanish while we look (code running in the background) are simply not listed.
    """
    files: dict[str, tuple[int, int]] = {}
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    files[os.path.relpath(entry.path, root)] = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                continue
    return files


class LocalSandbox:
    """A ``Sandbox`` backed by a local worker process (see the module docstring for isolation)."""

    isolation = "process"

    def __init__(self, workdir: Path | None = None, limits: Limits = Limits(),
                 python: str | None = None, start_timeout: float = 30.0) -> None:
        self._owns_workdir = workdir is None
        root = Path(tempfile.mkdtemp(prefix="vtb-sandbox-") if workdir is None else workdir)
        root.mkdir(parents=True, exist_ok=True)
        self.workdir = root.resolve()
        self.limits, self._start_timeout = limits, start_timeout
        self._python = python or sys.executable
        self._lock, self._closed, self._cell = threading.Lock(), False, 0
        try:
            self._worker: _Worker | None = self._start()
        except BaseException:
            if self._owns_workdir:
                shutil.rmtree(self.workdir)
            raise

    def _start(self) -> _Worker:
        return _Worker(self._python, self.workdir, self.limits, self._start_timeout)

    def run(self, code: str, timeout: float = DEFAULT_TIMEOUT_S) -> ExecResult:
        """Execute ``code`` in the persistent interpreter (one call at a time)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            out, err, state_lost = CappedText(), CappedText(), False
            if self._worker is None or (died := self._worker.exit_code(0)) is not None:
                if self._worker is not None:  # died between calls (a thread called os._exit...)
                    err.add(f"[sandbox: before this call, {self._worker.death_message(died)}]\n")
                    self._worker.kill()
                self._worker, state_lost = self._start(), True
            worker = self._worker
            worker.drain(None, None, to_eof=False)  # late output of the previous call
            before = _snapshot(self.workdir)
            self._cell += 1
            start = time.monotonic()
            status, reply = worker.exchange({"op": "run", "id": self._cell, "code": code},
                                            start + timeout, out, err)
            if status == "reply" and reply is not None:
                worker.drain(out, err, to_eof=False)
                err.add(reply["traceback"])
                ok, error = bool(reply["ok"]), reply["error"]
            else:
                exit_status = None if status == "timeout" else worker.exit_code(1.0)
                worker.kill(out, err)
                ok, state_lost = False, True
                error = (f"timeout after {timeout:g} s; {_STATE_RESET}" if status == "timeout"
                         else "the sandbox was closed during this call" if self._closed
                         else worker.death_message(exit_status))
                self._worker = None if self._closed else self._start()
            return ExecResult(ok=ok, stdout=out.text(), stderr=err.text(), error=error,
                              new_files=sorted(k for k, v in _snapshot(self.workdir).items()
                                               if before.get(k) != v),
                              duration_s=time.monotonic() - start, state_lost=state_lost)

    def _path(self, name: str) -> Path:
        """``name`` inside the working directory; ValueError if it would escape it."""
        path = self.workdir.joinpath(*relative_name(name).parts)
        if not path.resolve().is_relative_to(self.workdir):
            raise ValueError(f"file name {name!r} leads out of the working directory (symlink)")
        return path

    def put_file(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` (relative to the working directory)."""
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def get_file(self, name: str) -> bytes:
        """Read ``name`` (relative to the working directory)."""
        return self._path(name).read_bytes()

    def list_files(self) -> list[str]:
        """Relative names of all regular files under the working directory, sorted."""
        return sorted(_snapshot(self.workdir))

    def close(self) -> None:
        """Kill the worker (and its children), remove an owned temporary workdir; idempotent."""
        if self._closed:
            return
        self._closed = True
        worker = self._worker
        if worker is not None and not worker.closed:
            worker.signal_group()  # makes a run() in another thread return promptly
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
            if self._owns_workdir:
                shutil.rmtree(self.workdir)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
