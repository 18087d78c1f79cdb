"""``LocalSandbox``: model-written code runs in a persistent Python worker subprocess.

How the worker is isolated depends on the level (``isolation.py`` says what each guarantees):
``"bwrap"`` (bubblewrap: namespaces, minimal read-only file system, uid 65534), ``"fallback"``
(the worker unshares namespaces itself) or ``"process"`` (rlimits and a scrubbed environment only).
``isolation="auto"`` (default, or ``$VTB_SANDBOX_ISOLATION``) takes the best level that works here,
probed once per process; ``strict=True`` refuses anything but bwrap. The worker starts at the first
``run`` call: writing, listing and reading files needs only the working directory, so an episode
that never runs code costs no process. At the "bwrap" level, as root, the worker is forked by the
process's fork server (``forkserver.py``: one zygote that imported PIL, NumPy and OpenCV once;
each worker still gets its own namespaces, working directory, cgroup, uid and filter) unless
``fork_server=False``; elsewhere it is started as a program. In every level the worker keeps
its Python state across calls (from any thread: workers are started by one process-wide thread,
``spawner.py``, so that they die with the host and not with the caller's thread), a call that
overruns its timeout kills and restarts it, and stdout/stderr are capped.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S
from vtb_agents.safefs import open_in_dir

from . import isolation as iso
from . import seccomp
from .base import STATE_RESET, ExecResult, SandboxError
from .cgroup import CgroupUnavailable, MemoryCgroup, join_command, open_memory_cgroup
from . import forkserver
from .forkserver import ForkServer
from .host import (SpawnedProcess, TreeScan, WorkerPipes, WorkerProcess, changed_files, remove_changes,
                   scan_tree, snapshot)
from .leftovers import owned_tempdir
from .limits import Limits
from .output import CappedText
from .removal import RemovalError, discard_tree
from .spawner import spawn
from .walk import chown_tree
from .worker import MAX_FRAME, encode_frame

WORKER_PATH = Path(__file__).with_name("worker.py")
TRACKER_SOURCE = Path(__file__).with_name("region_tracker.py").read_text(encoding="utf-8")
"""Image-region tracking the worker installs in its kernels (``region_tracker.py``)."""
_log = logging.getLogger(__name__)
_PASSTHROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")
QUOTA_POLL_S = 0.1
"""How often the host measures the working directory while a call runs."""


def supervisor_reply_problem(reply: dict[str, Any], cell: int) -> str | None:
    """Why ``reply`` is not the supervisor's answer to ``cell`` (worker.py's schema); None if it is."""
    if reply.get("id") != cell or not isinstance(reply.get("ok"), bool):
        return "wrong id or no 'ok'"
    if (not (reply.get("error") is None or isinstance(reply["error"], str))
            or not isinstance(reply.get("traceback"), str)):
        return "bad 'error' or 'traceback'"
    for key in ("reset_before", "failure"):
        reset = reply.get(key, 0)
        if reset is not None and not (isinstance(reset, dict) and len(reset) == 1 and (
                isinstance(reset.get("exit"), int) or isinstance(reset.get("channel"), str))):
            return f"bad {key!r}"
    return None


def worker_env(home: str) -> dict[str, str]:
    """The worker's whole environment: a minimal set, nothing inherited that could be a secret."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
    }
    env.update({k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ})
    return env


def worker_command(python: str, ctl_in: int, ctl_out: int, limits: Limits, *,
                   worker_path: str = str(WORKER_PATH),
                   setup: dict[str, Any] | None = None) -> list[str]:
    """argv that starts the worker; ``-I`` ignores PYTHON* variables and the user site. With
    ``setup["site"]`` (see :func:`site_setup`) it also skips ``site`` (``-S``): the worker puts those
    directories on ``sys.path`` itself, without running their ``.pth`` files."""
    flags = ["-I", "-S", "-B"] if setup is not None and "site" in setup else ["-I", "-B"]
    command = [python, *flags, worker_path, str(ctl_in), str(ctl_out),
               json.dumps(asdict(limits))]
    return command if setup is None else [*command, json.dumps(setup)]


def site_setup(python: str) -> dict[str, Any] | None:
    """What ``site`` gives ``python`` at start (its site-packages directories, a venv's
    ``sys.prefix``), when ``python`` is this interpreter, which ran ``site``; else None (the worker
    then runs ``site`` itself).

    A worker that skips ``site`` starts ~10 ms sooner, a sixth of a sandbox's start: ``site`` runs
    every ``.pth`` file (an editable install's import hook, setuptools' distutils shim), and code in
    the sandbox needs none of them, only the packages.
    """
    # the path as given, not resolved: a venv's python is a link to its base interpreter, which
    # started from the link's own path finds the venv (pyvenv.cfg) and from the target does not
    if sys.flags.no_site or os.path.abspath(python) != os.path.abspath(sys.executable):
        return None
    return {"path": [d for d in site.getsitepackages() if os.path.isdir(d)],
            "prefix": sys.prefix, "exec_prefix": sys.exec_prefix}


class _Worker(WorkerPipes):
    """One worker process with its control pipes and its stdout/stderr pipes."""

    def __init__(self, level: str, python: str, workdir: Path, limits: Limits,
                 start_timeout: float, cgroup: MemoryCgroup | None = None,
                 seccomp_program: bytes | None = None, server: ForkServer | None = None) -> None:
        self.level, self.limits, self.seccomp_program = level, limits, seccomp_program
        self.server = server
        deadline = time.monotonic() + start_timeout
        ctl_in_r, self.ctl_w = os.pipe()   # parent -> worker
        self.ctl_r, ctl_out_w = os.pipe()  # worker -> parent
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        child_fds, ours = [ctl_in_r, ctl_out_w, out_w, err_w], []
        handshake: tuple[int, int | None] | None = None  # our ends of bwrap's info and block pipes
        theirs: tuple[int, int | None] | None = None  # bwrap's
        try:
            if server is not None:
                self.proc: WorkerProcess = server.fork(workdir, list(child_fds), limits,
                                                       self._forked_setup(), cgroup, deadline)
            elif level == "bwrap":  # bwrap reports its pid 1 on the info pipe; as root, it waits for the uid map
                info_r, info_w = os.pipe()
                ours.append(info_r)
                child_fds += [info_w, os.dup(info_r)]  # a reader in bwrap: its report never meets SIGPIPE
                block_r = block_w = None
                if iso.drops_uid():
                    block_r, block_w = os.pipe()
                    ours.append(block_w)
                    child_fds.append(block_r)
                handshake, theirs = (info_r, block_w), (info_w, block_r)
            if server is None:
                argv, env = self._argv(python, workdir, ctl_in_r, ctl_out_w, child_fds, theirs)
                if cgroup is not None:
                    argv = join_command(cgroup.procs, argv)
                spawned = SpawnedProcess(spawn(lambda: subprocess.Popen(  # by a thread that lives: spawner.py
                    argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                    pass_fds=tuple(child_fds), start_new_session=True)))
                self.proc = spawned
        except BaseException:
            self._close_fds(self.ctl_w, self.ctl_r, self.out_r, self.err_r, *ours)
            raise
        finally:
            self._close_fds(*child_fds)
        for fd in (self.ctl_w, self.ctl_r, self.out_r, self.err_r):
            os.set_blocking(fd, False)
        self.open_outputs = {self.out_r, self.err_r}
        self.inbox, self.outbox, self.closed = bytearray(), b"", False
        _live_workers.add(self)
        out, err = CappedText(), CappedText()
        status, frame = "handshake failed", None
        try:
            if handshake is not None:
                spawned.set_inner(iso.bwrap_handshake(*handshake, deadline))
            status, frame = self.exchange(None, deadline, out, err)
        except (OSError, ValueError, RuntimeError) as exc:
            err.add(f"[sandbox: {type(exc).__name__}: {exc}]\n")
        finally:
            self._close_fds(*ours)
        if status != "reply" or frame is None or frame.get("op") != "ready" \
                or frame.get("isolation") != level \
                or frame.get("seccomp") != (seccomp_program is not None):
            self.kill(out, err)
            raise SandboxError(f"the sandbox worker did not start at isolation level {level!r} "
                               f"({status}): {err.text()[-4000:]}")

    def _forked_setup(self) -> dict[str, Any]:
        """``worker.serve``'s setup for a worker the fork server forks (its site is the zygote's)."""
        setup: dict[str, Any] = {"level": self.level, "drop": True, "chdir": iso.INSIDE_WORKDIR,
                                 "tracker": TRACKER_SOURCE}  # patches the preloaded PIL.Image per task
        if self.seccomp_program is not None:
            setup["seccomp"] = self.seccomp_program.hex()
        return setup

    def _argv(self, python: str, workdir: Path, ctl_in: int, ctl_out: int, child_fds: list[int],
              handshake: tuple[int, int | None] | None) -> tuple[list[str], dict[str, str]]:
        """The command line and environment for this level (bwrap options go through a pipe);
        ``handshake``: bwrap's (info fd, userns block fd or None), the ends bwrap gets."""
        limits = self.limits if self.level != "process" else replace(self.limits, processes=0)
        setup: dict[str, Any] = {"level": self.level, "drop": self.level != "process" and iso.drops_uid(),
                                 "tracker": TRACKER_SOURCE}
        if (site_state := site_setup(python)) is not None:
            setup["site"] = site_state
        if self.seccomp_program is not None:
            setup["seccomp"] = self.seccomp_program.hex()
        if self.level == "fallback":
            setup["module"] = iso.__file__
            setup["fallback"] = iso.fallback_config(iso.python_roots(python),
                                                    str(WORKER_PATH.parent), str(workdir),
                                                    self.limits.tmp_bytes)
        if self.level != "bwrap":  # (under bwrap, the worker dies when its control pipe closes)
            setup["parent"] = os.getpid()
            command = worker_command(python, ctl_in, ctl_out, limits, setup=setup)
            return command, worker_env(str(workdir))
        bwrap = shutil.which("bwrap")
        if bwrap is None or handshake is None:
            raise SandboxError("bubblewrap (bwrap) is not installed")
        options, data_fds = iso.bwrap_args(
            iso.python_roots(python), {iso.INSIDE_WORKER: str(WORKER_PATH)}, str(workdir),
            worker_env(iso.INSIDE_WORKDIR), self.limits.tmp_bytes, *handshake)
        child_fds += data_fds
        command = worker_command(python, ctl_in, ctl_out, limits, worker_path=iso.INSIDE_WORKER,
                                 setup={**setup, "chdir": iso.INSIDE_WORKDIR})
        args_fd = iso.args_pipe(options)  # the command itself must stay on the command line
        child_fds.append(args_fd)
        return [bwrap, "--args", str(args_fd), "--", *command], {}

    def reset_message(self, reset: dict[str, Any]) -> str:
        """One line for the supervisor's account of a lost kernel: it died, or the code misused its
        channel to the supervisor (see worker.py)."""
        if "exit" in reset:
            return self.death_message(reset["exit"], raw=True)
        return (f"the code wrote to or closed the sandbox's control channel ({reset['channel']}); "
                f"{STATE_RESET}")

    def death_message(self, code: int | None, raw: bool = False) -> str:
        """One line saying how the worker died (bwrap and fallback report signal n as 128 + n,
        unless ``raw``: the status as the supervisor read it, minus n for signal n)."""
        if not raw and code is not None and code > 128 and self.level != "process" and code - 128 < signal.NSIG:
            code = 128 - code
        if code is None:
            what = "the Python worker closed its control pipe"
        elif code >= 0:
            what = f"the Python worker exited with code {code} (os._exit or a crash)"
        else:
            sig = {s.value: s for s in signal.Signals}.get(-code)
            what = f"the Python worker was killed by {sig.name if sig else f'signal {-code}'}" + ({
                signal.SIGXCPU: f" (CPU limit of {self.limits.cpu_seconds} s per worker reached)",
                signal.SIGKILL: " (possibly out of memory)",
                signal.SIGSEGV: " (crash in native code)",
            }.get(sig, "") if sig else "")
        return f"{what}; {STATE_RESET}"


_live_workers: weakref.WeakSet[_Worker] = weakref.WeakSet()


def _release_after_fork() -> None:
    """In a process forked from the host (``os.fork``, a ``fork`` multiprocessing pool): point
    every live worker's pipe ends at /dev/null. A worker under bwrap ends when the host's end of its
    control pipe closes (isolation.py); a copy held by the child would keep it alive after the
    host's death. The fd numbers stay valid (nothing else can take them); the child's copies of
    the sandboxes refuse to run (:meth:`LocalSandbox.run`)."""
    workers = [w for w in list(_live_workers) if not w.closed]
    if not workers:
        return
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    for worker in workers:
        for fd in (worker.ctl_w, worker.ctl_r, worker.out_r, worker.err_r):
            os.dup2(null, fd, inheritable=False)
        worker.closed = True  # nothing of it to kill or close here
    os.close(null)


os.register_at_fork(after_in_child=_release_after_fork)


@functools.cache
def _warn_once_without_fork_server(reason: str) -> None:
    _log.warning("sandbox workers start as programs (no fork server): %s", reason)


@functools.cache
def _warn_once_without_cgroup(reason: str) -> None:
    _log.warning("sandbox memory is capped per process only (no cgroup for the sandbox): %s", reason)


def _probe(level: str, python: str, limits: Limits) -> str | None:
    """Start and stop one worker at ``level`` in a scratch directory: None, or why it failed."""
    if level == "bwrap" and shutil.which("bwrap") is None:
        return "bwrap was not found on PATH"
    scratch = owned_tempdir("vtb-sandbox-probe-")  # a killed host's is removed by the next probe
    try:
        if iso.drops_uid():
            os.chown(scratch, iso.SANDBOX_ID, iso.SANDBOX_ID)
        _Worker(level, python, scratch, limits, start_timeout=30.0).kill()
    except (SandboxError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        discard_tree(scratch, "the isolation probe's folder")
    return None


def _probe_and_warn(level: str, python: str, limits: Limits) -> str | None:
    """``_probe``, with a warning (once per process and level) when the level is unavailable."""
    error = _probe(level, python, limits)
    if error is not None:
        _log.warning("sandbox isolation level %r is not available: %s", level, error)
    return error


def choose_level(requested: str, strict: bool, python: str, limits: Limits = Limits()) -> str:
    """The level to run at: ``requested`` if it works here, for "auto" the best one that does."""
    level = iso.requested_level(requested)
    if strict and level not in ("auto", "bwrap"):
        raise SandboxError(f"strict sandboxing needs isolation 'bwrap', not {level!r}")
    if level == "process":
        return level
    for candidate in ("bwrap", "fallback") if level == "auto" else (level,):
        error = iso.probed(candidate, python, functools.partial(_probe_and_warn, candidate, python, limits))
        if error is None:
            return candidate
        if candidate == "bwrap" and strict:
            raise SandboxError(f"bubblewrap (bwrap) is not installed or not usable: {error}; "
                               "install it or drop --sandbox-strict")
        if level != "auto":
            raise SandboxError(f"isolation level {candidate!r} is not available here: {error}")
    return "process"


def probe_in_background(isolation: str | None = None, python: str | None = None) -> threading.Thread:
    """Probe the isolation levels in a daemon thread, so that the first sandbox of a run finds the
    level already chosen (the probe starts and stops one worker per level, ~0.1 s) instead of every
    first-wave task waiting for it. Only the probe's cache is filled: an unusable level is reported
    by the sandbox that asks for it, as without the warm-up."""
    level = iso.requested_level(isolation)

    def probe() -> None:
        with contextlib.suppress(SandboxError):  # raised again, to its caller, by the sandbox that needs it
            choose_level(level, False, python or sys.executable)

    thread = threading.Thread(target=probe, name="vtb-sandbox-probe", daemon=True)
    thread.start()
    return thread


class LocalSandbox:
    """A ``Sandbox`` backed by a local worker process (see the module docstring for isolation).

    ``isolation``: "auto" (default; ``None`` reads ``$VTB_SANDBOX_ISOLATION``), "bwrap", "fallback"
    or "process"; afterwards the attribute holds the level actually achieved. ``strict=True``
    raises SandboxError unless that level is "bwrap". ``fork_server`` (default: where
    ``forkserver.wanted`` says so) forks the worker from the process's fork server instead of
    starting it as a program; the attribute says which. ``memory_cap`` says how the memory of all
    the worker's processes together is capped (``cgroup v1, 4096 MiB``) or why it is not;
    ``syscall_filter`` which seccomp filter the worker runs under (``seccomp.py``). The level is
    chosen (and refused under ``strict``) here; the worker starts at the first :meth:`run`, and a
    worker that cannot start makes that call raise SandboxError.
    """

    isolation: str
    memory_cap: str
    syscall_filter: str
    network = "none"

    def __init__(self, workdir: Path | None = None, limits: Limits = Limits(),
                 python: str | None = None, start_timeout: float = 30.0,
                 isolation: str | None = None, strict: bool = False,
                 fork_server: bool | None = None) -> None:
        self._python = python or sys.executable
        self.isolation = choose_level(iso.requested_level(isolation), strict, self._python, limits)
        if fork_server and self.isolation != "bwrap":
            raise SandboxError(f"the fork server needs isolation 'bwrap', not {self.isolation!r}")
        self.fork_server = forkserver.wanted(self.isolation) if fork_server is None else fork_server
        self._fork_chosen = fork_server is not None  # asked for: its failure is the sandbox's
        self._owns_workdir = workdir is None
        root = owned_tempdir("vtb-sandbox-") if workdir is None else Path(workdir)
        root.mkdir(parents=True, exist_ok=True)
        self.workdir = root.resolve()
        self.limits, self._start_timeout = limits, start_timeout
        self._owner = ((iso.SANDBOX_ID, iso.SANDBOX_ID)
                       if self.isolation != "process" and iso.drops_uid() else None)
        self._lock, self._closed, self._cell = threading.Lock(), False, 0
        self._host_pid = os.getpid()  # a forked copy of this object is not the sandbox's host
        self._worker: _Worker | None = None  # started by the first run(): files need no worker
        self._started = False
        self._cgroup: MemoryCgroup | None = None
        self._seccomp = seccomp.filter_program()
        self.syscall_filter = seccomp.describe(self._seccomp)
        try:
            self._cgroup = self._open_cgroup()
            if self._owner is not None:  # the worker's uid must be able to write there
                chown_tree(self.workdir, os.getuid(), *self._owner)
        except BaseException:
            if self._cgroup is not None:
                self._cgroup.close()
            if self._owns_workdir:
                discard_tree(self.workdir, "the sandbox's working directory")
            raise

    @property
    def worker_pid(self) -> int | None:
        """The host pid of the running worker process (bwrap's at that level), or None before the first
        :meth:`run` and after :meth:`close`."""
        worker = self._worker
        return None if worker is None or worker.closed else worker.proc.pid

    def _open_cgroup(self) -> MemoryCgroup | None:
        """This sandbox's memory cgroup, or None (and ``memory_cap`` says why) where impossible."""
        if not self.limits.memory_bytes:
            self.memory_cap = "off (Limits.memory_bytes=0): per-process rlimits only"
            return None
        try:
            cgroup = open_memory_cgroup(self.limits.memory_bytes)
        except CgroupUnavailable as exc:
            self.memory_cap = f"per-process rlimits only ({exc})"
            _warn_once_without_cgroup(str(exc))
            return None
        self.memory_cap = cgroup.describe()
        return cgroup

    def _start(self) -> _Worker:
        lost = self._worker.server if self._worker is not None else None
        if lost is not None and not lost.alive():  # the worker and its state died with the zygote
            raise SandboxError(f"the sandbox's fork server ended ({lost.death()}), and with it "
                               f"this sandbox's worker; {STATE_RESET}")
        self._started = True
        try:
            return _Worker(self.isolation, self._python, self.workdir, self.limits, self._start_timeout,
                           self._cgroup, self._seccomp, self._fork_server())
        except OSError as exc:  # the sandbox's failure, not the code's: SandboxError ends the episode
            raise SandboxError(f"the sandbox worker could not start: {exc}") from exc

    def _fork_server(self) -> ForkServer | None:
        """The fork server to fork the worker from, or None to start it as a program (also when
        none can start here and this sandbox did not ask for one: said once, in a warning)."""
        if not self.fork_server:
            return None
        try:
            return forkserver.fork_server(self._python, site_setup(self._python), worker_env(iso.INSIDE_WORKDIR))
        except SandboxError as exc:
            if self._fork_chosen:
                raise
            _warn_once_without_fork_server(str(exc))
            self.fork_server = False
            return None

    def _kill(self, worker: _Worker, out: CappedText | None = None,
              err: CappedText | None = None) -> None:
        """Kill ``worker``'s process group and anything else still in the sandbox's cgroup."""
        worker.kill(out, err)
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def run(self, code: str, timeout: float = DEFAULT_CODE_TIMEOUT_S) -> ExecResult:
        """Execute ``code`` in the persistent interpreter (one call at a time)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            if os.getpid() != self._host_pid:
                raise SandboxError(f"this sandbox belongs to process {self._host_pid}, not to this "
                                   "one (forked from it): open a sandbox of its own")
            out, err, state_lost = CappedText(), CappedText(), False
            if self._worker is None or (died := self._worker.exit_code(0)) is not None:
                if self._worker is not None:  # died between calls (a thread called os._exit...)
                    err.add(f"[sandbox: before this call, {self._worker.death_message(died)}]\n")
                    self._kill(self._worker)
                state_lost = self._started  # a first start loses nothing
                self._worker = self._start()
            worker = self._worker
            worker.drain(None, None, to_eof=False)  # late output of the previous call
            before = scan_tree(self.workdir)
            self._cell += 1
            start = time.monotonic()
            request = {"op": "run", "id": self._cell, "code": code}
            if len(encode_frame(request)) > MAX_FRAME:
                return ExecResult(ok=False, error=f"the code is too long ({len(code):,} characters)")
            status, reply, after = self._exchange_watched(worker, request, start + timeout, out, err)
            if status == "reply" and (reply is None or supervisor_reply_problem(reply, self._cell)):
                status = "malformed"  # the supervisor never sends this: treat the worker as broken
            if status == "reply" and reply is not None:
                worker.drain(out, err, to_eof=False)
                err.add(reply["traceback"])
                ok, error = bool(reply["ok"]), reply["error"]
                if reply["reset_before"] is not None:
                    err.add(f"[sandbox: before this call, {worker.reset_message(reply['reset_before'])}]\n")
                    state_lost = True
                if reply["failure"] is not None:
                    ok, error, state_lost = False, worker.reset_message(reply["failure"]), True
            else:
                exit_status = None if status in ("timeout", "quota") else worker.exit_code(1.0)
                self._kill(worker, out, err)
                ok, state_lost = False, True
                error = (f"timeout after {timeout:g} s; {STATE_RESET}" if status == "timeout"
                         else "the sandbox was closed during this call" if self._closed
                         else self._quota_message() if status == "quota"
                         else f"the sandbox worker sent a malformed control frame; {STATE_RESET}"
                         if status == "malformed"
                         else worker.death_message(exit_status))
                if status == "quota":
                    try:
                        remove_changes(self.workdir, before)
                    except RemovalError as exc:  # the code's files: its call failed anyway, say why
                        error = f"{error}; {exc}"
                after = scan_tree(self.workdir)
                self._worker = None if self._closed else self._start()
            if (unreadable := after.unreadable_message()) is not None:  # the code took permissions away
                ok, error = False, "; ".join(filter(None, [error, unreadable]))
            return ExecResult(ok=ok, stdout=out.text(), stderr=err.text(), error=error,
                              new_files=changed_files(before, after),
                              duration_s=time.monotonic() - start, state_lost=state_lost)

    def _exchange_watched(self, worker: _Worker, request: dict[str, Any], deadline: float,
                          out: CappedText, err: CappedText
                          ) -> tuple[str, dict[str, Any] | None, TreeScan]:
        """``worker.exchange`` in slices of ``QUOTA_POLL_S``, measuring the working directory
        after each: status "quota" once it holds more than ``limits.workdir_bytes``."""
        quota = self.limits.workdir_bytes
        sent: dict[str, Any] | None = request
        while True:
            until = min(deadline, time.monotonic() + QUOTA_POLL_S) if quota else deadline
            status, reply = worker.exchange(sent, until, out, err)
            sent = None  # sent, or the rest still waits in the worker's outbox
            scan = scan_tree(self.workdir)
            if quota and scan.used_bytes > quota:
                return "quota", None, scan
            if status != "timeout" or until >= deadline:
                return status, reply, scan

    def _quota_message(self) -> str:
        return (f"the working directory went over its quota of {self.limits.workdir_bytes >> 20} "
                "MiB; the call was stopped and the files it created or changed were removed; "
                f"{STATE_RESET}")

    def put_file(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` (relative to the working directory; never via a symlink)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(open_in_dir(self.workdir, name, flags, self._owner), "wb") as handle:
            handle.write(data)

    def get_file(self, name: str) -> bytes:
        """Read ``name`` (relative to the working directory; never via a symlink)."""
        with os.fdopen(open_in_dir(self.workdir, name, os.O_RDONLY), "rb") as handle:
            return handle.read()

    def list_files(self) -> list[str]:
        """Relative names of all regular files under the working directory, sorted."""
        return sorted(snapshot(self.workdir))

    def close(self) -> None:
        """Kill the worker (and its children); remove an owned temporary workdir, or give a kept
        one back to the host user; idempotent.

        What the code left in the working directory never makes this raise: a folder that cannot
        be removed in time (``removal.py``) is logged and left to the next process's leftover sweep.
        In a process forked from the host this only marks the copy closed.
        """
        if self._closed:
            return
        self._closed = True
        if os.getpid() != self._host_pid:  # a forked copy: the worker, folder and cgroup are the host's
            return
        worker = self._worker
        if worker is not None and not worker.closed:
            worker.signal_group()  # makes a run() in another thread return promptly
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
            if self._cgroup is not None:
                self._cgroup.close()
            if self._owns_workdir:
                discard_tree(self.workdir, "the sandbox's working directory")
            elif self._owner is not None:
                chown_tree(self.workdir, self._owner[0], os.getuid(), os.getgid())

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
