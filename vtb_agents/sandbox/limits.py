"""``Limits``: the resource limits of a local sandbox worker, on their own.

The local backend (``local.py``) applies them and the fork server (``forkserver.py``) hands them to
the zygote for each worker it forks; both import them from here, so neither imports the other's
module for them (docs/concepts/sandbox.md lists the numbers).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """rlimits of the worker process (0 disables one) and the size of its private /tmp.

    ``cpu_seconds`` is CPU time over the whole life of one worker (it restarts after a timeout or
    crash), not per call. ``processes`` (RLIMIT_NPROC, threads included) applies at the bwrap and
    fallback levels only, where the worker has its own uid or user namespace; at the "process"
    level it would count the host user's processes. ``tmp_bytes`` caps the private /tmp tmpfs.
    ``workdir_bytes`` caps everything in the working directory together (as ``host.scan_tree``
    counts it): the host measures it every ``local.QUOTA_POLL_S`` during a call, and a call that goes
    over it is killed and what it wrote removed, so code cannot fill the host's disk with many
    files each under ``file_size_bytes``. ``memory_bytes`` caps the memory of the worker and all
    its processes together, through a cgroup where the machine allows one (``cgroup.py``);
    ``LocalSandbox.memory_cap`` says whether it does.
    """

    address_space_bytes: int = 4 << 30
    cpu_seconds: int = 600
    file_size_bytes: int = 512 << 20
    processes: int = 256
    tmp_bytes: int = 256 << 20
    workdir_bytes: int = 2 << 30
    memory_bytes: int = 4 << 30
