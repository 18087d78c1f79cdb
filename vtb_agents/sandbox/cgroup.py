"""A memory cap over a sandbox worker and everything it starts: a cgroup of its own.

rlimits are per process: code allowed 256 processes of 4 GiB each could still exhaust the host.
Where this machine lets us create a cgroup below our own (cgroup v1's memory controller, as on
most containers run as root, or cgroup v2 with the memory controller delegated to our cgroup),
each sandbox gets one with ``memory.limit_in_bytes`` / ``memory.max`` set; its worker joins it
before it starts (``join_command``), so every process it forks is counted together and the
kernel's OOM killer acts inside the sandbox only. Closing the cgroup also kills processes that
left the worker's process group (``setsid`` daemons). Elsewhere (no root, no delegation)
``open_memory_cgroup`` says why not and the sandbox keeps the per-process rlimits.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
PREFIX = "vtb-sandbox-"
_REMOVE_WAIT_S = 5.0
_log = logging.getLogger(__name__)


class CgroupUnavailable(RuntimeError):
    """This machine does not let us create a memory-limited cgroup (the message says why)."""


def own_memory_cgroup(proc_cgroup: str, fs: Path = CGROUP_FS) -> tuple[Path, str]:
    """The directory of this process's memory cgroup and its version ("v1" or "v2").

    ``proc_cgroup`` is the text of ``/proc/self/cgroup`` (``id:controllers:path`` lines).
    """
    v2_path = None
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return fs / "memory" / path.lstrip("/"), "v1"
        if controllers == "":
            v2_path = path
    if v2_path is None:
        raise CgroupUnavailable("no memory controller in /proc/self/cgroup")
    root = fs if (fs / "cgroup.controllers").exists() else fs / "unified"
    return root / v2_path.lstrip("/"), "v2"


@dataclass
class MemoryCgroup:
    """One sandbox's cgroup; ``procs`` is the file a process writes its pid to, to join it."""

    path: Path
    version: str
    limit_bytes: int

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        """Processes in the cgroup now."""
        try:
            return [int(p) for p in self.procs.read_text().split()]
        except FileNotFoundError:
            return []

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the cgroup (the fork server's workers join this way: before
        their first process forks any other, so every process of the worker is counted)."""
        self.procs.write_text(str(pid))

    def describe(self) -> str:
        """One line for run metadata, e.g. ``cgroup v1, 4096 MiB``."""
        return f"cgroup {self.version}, {self.limit_bytes >> 20} MiB"

    def kill_all(self) -> None:
        """SIGKILL every process inside (those that left the worker's process group too)."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited since we listed it

    def close(self) -> None:
        """SIGKILL whatever is left inside and remove the cgroup; idempotent."""
        deadline, pause = time.monotonic() + _REMOVE_WAIT_S, 0.001
        while True:
            self.kill_all()
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:  # EBUSY while killed processes are still being torn down
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                # teardown takes a few ms: short pauses first (a sandbox closes at the end of every task)
                time.sleep(pause)
                pause = min(2 * pause, 0.02)


def open_memory_cgroup(limit_bytes: int, fs: Path = CGROUP_FS) -> MemoryCgroup:
    """Create a cgroup below ours holding at most ``limit_bytes``; ``CgroupUnavailable`` if we can't."""
    if limit_bytes <= 0:
        raise ValueError(f"a memory limit must be positive, not {limit_bytes}")
    try:
        parent, version = own_memory_cgroup(Path("/proc/self/cgroup").read_text(), fs)
    except OSError as exc:
        raise CgroupUnavailable(f"cannot read /proc/self/cgroup: {exc}") from exc
    limit_file = "memory.limit_in_bytes" if version == "v1" else "memory.max"
    remove_orphans(parent)
    path = parent / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    try:
        path.mkdir()
    except OSError as exc:
        raise CgroupUnavailable(f"cannot create a cgroup under {parent}: {exc.strerror}") from exc
    group = MemoryCgroup(path, version, limit_bytes)
    try:
        (path / limit_file).write_text(str(limit_bytes))
        if version == "v1" and (path / "memory.memsw.limit_in_bytes").exists():
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))  # swap counts too
        elif version == "v2" and (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
    except OSError as exc:
        group.close()
        raise CgroupUnavailable(f"cannot set {limit_file} in {path} (memory controller not "
                                f"delegated here?): {exc.strerror}") from exc
    return group


def remove_orphans(parent: Path) -> list[str]:
    """Kill what is left in the sandbox cgroups of host processes that died, and remove them.

    A name carries the pid of the host process that made it; only cgroups of hosts that no longer
    exist are touched. A host killed with SIGKILL while a bwrap sandbox was starting can leave a
    process behind that nothing else would ever stop (bwrap's child waits for its dead parent).
    """
    removed = []
    for path in parent.glob(f"{PREFIX}*-*"):
        owner = path.name[len(PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            try:
                MemoryCgroup(path, "orphan", 0).close()
            except OSError as exc:  # not ours to fail a new sandbox over: say so and go on
                _log.warning("could not remove the orphaned sandbox cgroup %s: %s", path, exc)
                continue
            removed.append(path.name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def join_command(procs: Path, command: list[str]) -> list[str]:
    """``command`` run by a shell that first moves itself into the cgroup (``procs``), then execs.

    Joining before ``exec`` leaves no moment in which the worker runs outside the cgroup.
    """
    return ["/bin/sh", "-c", 'echo $$ > "$0" || exit 125; exec "$@"', str(procs), *command]
