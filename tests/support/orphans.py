"""Run a command as the child of a child subreaper, SIGKILL it at a chosen moment, and report the
processes it left behind (used by ``test_sandbox_lifetime.py``).

``python orphans.py MOMENT GRACE_S [EXPECTED] -- COMMAND...`` prints one JSON object: ``{"killed": bool,
"survivors": [{"pid", "comm", "cmdline"}...]}``. This process sets ``PR_SET_CHILD_SUBREAPER``, so
every process the command leaves orphaned is re-parented to it instead of to pid 1; after
``GRACE_S`` seconds the orphans still running are the survivors (then killed here, so that a
failing test leaves nothing behind either). The grace period ends early once no more than
``EXPECTED`` orphans (default 0) are left: a test that leaves a process running on purpose (one
that sleeps on) says so, and does not wait out the whole grace period for it. ``MOMENT`` is when
the command is killed:

- ``after:S``: S seconds after it started;
- ``process:TEXT``: as soon as a process below it has TEXT in its command line (polled every
  millisecond);
- ``processes:N:TEXT``: as soon as N processes below it have TEXT in their command lines;
- ``file:PATH``: as soon as PATH exists.

Standard library only: it runs under any interpreter.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from proctree import tree  # beside this script (sys.path[0] when it runs)

PR_SET_CHILD_SUBREAPER = 36
_GIVE_UP_S = 120.0


def cmdline(pid: int) -> str:
    """The command line of ``pid`` with spaces between arguments ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_for_moment(child: subprocess.Popen[bytes], moment: str) -> bool:
    """Block until ``moment`` (see the module docstring); False when the command ended first."""
    kind, _, rest = moment.partition(":")
    started = time.monotonic()
    count, text = (int(rest.partition(":")[0]), rest.partition(":")[2]) if kind == "processes" else (1, rest)
    while child.poll() is None and time.monotonic() - started < _GIVE_UP_S:
        if kind == "after":
            if time.monotonic() - started >= float(rest):
                return True
        elif kind == "file":
            if os.path.exists(rest):
                return True
        elif sum(text in cmdline(p) for p in tree(child.pid)[1:]) >= count:
            return True
        time.sleep(0.001)
    return False


def reap() -> None:
    """Reap every adopted orphan that ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    options, command = argv[1:argv.index("--")], argv[argv.index("--") + 1:]
    moment, grace_s, expected = options[0], float(options[1]), int(options[2]) if len(options) > 2 else 0
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    killed = wait_for_moment(child, moment)
    child.kill()
    child.wait()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        reap()
        if len([p for p in tree(os.getpid())[1:] if alive(p)]) <= expected:
            break
        time.sleep(0.05)
    reap()
    survivors = [p for p in tree(os.getpid())[1:] if alive(p)]
    report = {"killed": killed, "survivors": [
        {"pid": p, "comm": Path(f"/proc/{p}/comm").read_text().strip() if alive(p) else "",
         "cmdline": cmdline(p)[:300]} for p in survivors]}
    for pid in reversed(survivors):  # leave nothing behind, whatever the test concludes
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.2)
    reap()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
