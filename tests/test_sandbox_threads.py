"""A local sandbox used from many threads: its worker lives as long as the sandbox, not as long as
the thread that happened to start it, and still dies with the host process.

The worker must die with the host (the fallback and process levels' ``PR_SET_PDEATHSIG``, which
Linux ties to the thread that forked it, prctl(2); under bwrap, the end of its control pipe): a
LangChain agent's tools run in pool threads that end after each turn, and its Python state must
survive them (``spawner.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vtb_agents.sandbox import ExecResult, LocalSandbox, SandboxError

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sb(tmp_path: Path) -> Iterator[LocalSandbox]:
    with LocalSandbox(workdir=tmp_path / "work") as sandbox:
        yield sandbox


def in_thread(call: Callable[[], ExecResult]) -> ExecResult:
    """``call()`` in a thread of its own, which has ended when this returns."""
    results: list[ExecResult] = []
    thread = threading.Thread(target=lambda: results.append(call()))
    thread.start()
    thread.join()
    assert not thread.is_alive() and len(results) == 1
    return results[0]


def test_state_survives_the_thread_that_started_the_worker(sb: LocalSandbox) -> None:
    first = in_thread(lambda: sb.run("x = 41"))
    assert first.ok and not first.state_lost, first
    pid = sb.worker_pid
    second = in_thread(lambda: sb.run("print(x + 1)"))
    assert second.ok and second.stdout == "42\n" and not second.state_lost, second
    assert "before this call" not in second.stderr
    assert sb.worker_pid == pid and pid is not None and Path(f"/proc/{pid}").exists()


def test_a_worker_restarted_by_an_ended_thread_keeps_its_state(sb: LocalSandbox) -> None:
    """After a timeout the sandbox starts a fresh worker in the same call, from that call's thread."""
    stopped = in_thread(lambda: sb.run("import time\ntime.sleep(60)", timeout=1))
    assert not stopped.ok and stopped.state_lost and (stopped.error or "").startswith("timeout after 1 s")
    pid = sb.worker_pid
    assert in_thread(lambda: sb.run("y = 6")).ok
    result = sb.run("print(y * 7)")
    assert result.ok and result.stdout == "42\n" and not result.state_lost, result
    assert sb.worker_pid == pid


HOST = """
import sys, threading
from pathlib import Path
from vtb_agents.sandbox import LocalSandbox

sandbox = LocalSandbox(workdir=Path(sys.argv[2]), isolation=sys.argv[1])
starter = threading.Thread(target=lambda: sandbox.run("x = 1"))
starter.start()
starter.join()
print(sandbox.worker_pid, flush=True)
sandbox.run("import time\\nopen('running', 'w').close()\\ntime.sleep(600)", timeout=900)
"""


def _tree(root: int) -> set[int]:
    """``root`` and every process below it."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            parents[int(entry)] = int(fields["PPid"])
    found, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found}
        grew = not below <= found
        found |= below
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("level", ["bwrap", "fallback", "process"])
def test_the_worker_dies_with_the_host_process_during_a_call(level: str, tmp_path: Path) -> None:
    """The host is killed while a cell runs, with a worker started by a thread that has ended."""
    try:
        LocalSandbox(workdir=tmp_path / "probe", isolation=level).close()
    except SandboxError as exc:
        pytest.skip(f"isolation level {level!r} is not available here: {exc}")
    host = subprocess.Popen([sys.executable, "-c", HOST, level, str(tmp_path / "work")], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        worker = int(host.stdout.readline())
        for _ in range(3000):
            if (tmp_path / "work" / "running").exists():
                break
            time.sleep(0.01)
        assert (tmp_path / "work" / "running").exists()
        processes = _tree(worker)
        assert len(processes) >= 2  # the worker and the kernel running the cell, at least
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    for _ in range(3000):
        if not any(_alive(pid) for pid in processes):
            break
        time.sleep(0.01)
    assert not [pid for pid in processes if _alive(pid)]
