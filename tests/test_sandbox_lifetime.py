"""No sandbox process outlives its host, however the host ends (SIGKILL at any moment), and
closing a fork server leaves none of its processes behind when it returns.

A helper (``support/orphans.py``) makes itself a child subreaper, starts the host and SIGKILLs it at a
chosen moment: every process the host leaves orphaned is then re-parented to the helper instead of
to pid 1, and the helper reports those still running after a grace period. The real ``vtb run``
(bundled sample suite, replay model, rule judge, local sandbox) is killed before its first sandbox,
while bubblewrap sets up (the uid-map handshake with the host: a host killed there used to leave
bwrap's child blocked for good, re-parented to pid 1), while the fork server starts, and while
tasks run; a host running a cell that never returns, with a daemon process of the code's, too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.proctree import tree
from support.cli import checkout_env, vtb_command

from vtb_agents.sandbox import LocalSandbox, SandboxError, forkserver
from vtb_agents.sandbox.forkserver import wanted
from vtb_agents.sandbox.local import choose_level

pytestmark = pytest.mark.timeout(300)
HELPER = Path(__file__).parent / "support" / "orphans.py"
GRACE_S = 20.0
FORKED, DIRECT = "forked", "bwrap"


def way_or_skip(way: str) -> dict[str, str]:
    """The environment that makes sandboxes start their workers ``way``; skipped where impossible."""
    try:
        level = choose_level("bwrap", strict=False, python=sys.executable)
    except SandboxError as exc:
        pytest.skip(f"no bwrap here: {exc}")
    if level != "bwrap" or (way == FORKED and not wanted("bwrap")):
        pytest.skip(f"no {way} workers here")
    return checkout_env(VTB_SANDBOX_ISOLATION="bwrap", VTB_SANDBOX_FORK_SERVER="1" if way == FORKED else "0")


def killed_at(moment: str, command: list[str], env: dict[str, str], expected: int = 0) -> dict[str, Any]:
    """Run ``command`` under the helper, SIGKILL it at ``moment``: the helper's report (its grace period
    ends early once only ``expected`` orphans are left, the ones the command leaves on purpose)."""
    done = subprocess.run([sys.executable, str(HELPER), moment, str(GRACE_S), str(expected), "--", *command], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


MOMENTS = {
    (FORKED, "before any sandbox"): "after:0.3",
    (FORKED, "while bwrap sets up"): "process:bwrap",
    (FORKED, "while the fork server starts"): "process:zygote.py",
    (FORKED, "while tasks run"): "processes:3:zygote.py",  # the zygote and a task's processes
    (DIRECT, "while bwrap sets up"): "process:bwrap",
    (DIRECT, "while tasks run"): "processes:3:worker.py",  # bwrap, a worker and its kernel
}


@pytest.mark.slow
@pytest.mark.parametrize(("way", "when"), list(MOMENTS), ids=[f"{w}-{m}" for w, m in MOMENTS])
def test_a_killed_run_leaves_no_sandbox_process(way: str, when: str, tmp_path: Path) -> None:
    env = way_or_skip(way)
    command = vtb_command("run", "--tasks", "sample", "--model", "replay", "--judge", "rule", "--out", tmp_path / "run")
    report = killed_at(MOMENTS[way, when], command, env)
    assert report["killed"], "the run ended before the moment came"
    assert report["survivors"] == [], report


HOST = """
import sys
from pathlib import Path
from vtb_agents.sandbox import LocalSandbox

with LocalSandbox(workdir=Path(sys.argv[1])) as sandbox:
    sandbox.run("import subprocess\\n"
                "daemon = subprocess.Popen(['sleep', '600'], start_new_session=True)\\n"
                "open('running', 'w').close()\\n"
                "import time\\ntime.sleep(600)", timeout=900)
"""


@pytest.mark.parametrize("way", [FORKED, DIRECT])
def test_a_host_killed_during_a_cell_leaves_nothing_of_the_code(way: str, tmp_path: Path) -> None:
    """The code's cell never returns and its daemon sleeps on: both end with the host."""
    env = way_or_skip(way)
    work = tmp_path / "work"
    report = killed_at(f"file:{work / 'running'}", [sys.executable, "-c", HOST, str(work)], env)
    assert report["killed"] and report["survivors"] == [], report


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_closing_ends_a_fork_server_that_does_not_end_by_itself(tmp_path: Path) -> None:
    """A zygote that does not exit when its socket closes (stopped here; slow on a loaded machine)
    is killed, and when ``close`` returns, none of its processes, nor any task's, is left."""
    way_or_skip(FORKED)
    sandbox = LocalSandbox(tmp_path / "a", isolation="bwrap")
    try:
        assert sandbox.run("x = 1").ok and sandbox.fork_server
        server = next(iter(forkserver._servers.values()))
        everything = tree(server.pid)
        zygote = next(p for p in everything if Path(f"/proc/{p}/comm").read_text().strip() != "bwrap")
        os.kill(zygote, signal.SIGSTOP)
        started = time.monotonic()
        forkserver.close_all()
        assert time.monotonic() - started < 60
        assert not [p for p in everything if running(p)]
    finally:
        sandbox.close()


FORKING_HOST = """
import os, sys, time
from pathlib import Path
from vtb_agents.sandbox import LocalSandbox, SandboxError

sandbox = LocalSandbox(workdir=Path(sys.argv[1]))
assert sandbox.run("x = 1").ok
if os.fork() == 0:  # a forked process (a fork pool's worker, say) outlives the host
    try:
        sandbox.run("print(x)")
    except SandboxError as exc:
        open(os.path.join(sys.argv[1], "refused"), "w").write(str(exc))
    sandbox.close()
    time.sleep(60)
    os._exit(0)
sandbox.run("open('running', 'w').close()\\nimport time\\ntime.sleep(600)", timeout=900)
"""


@pytest.mark.slow
@pytest.mark.parametrize("way", [FORKED, DIRECT])
def test_a_process_forked_from_the_host_keeps_no_sandbox_alive(way: str, tmp_path: Path) -> None:
    """The host's forked child holds copies of every pipe end: the sandbox still ends with the
    host, the child's copy of the sandbox refuses to run, and its close touches nothing."""
    env = way_or_skip(way)
    work = tmp_path / "work"
    report = killed_at(f"file:{work / 'running'}", [sys.executable, "-c", FORKING_HOST, str(work)], env, expected=1)
    assert report["killed"], report
    survivors = report["survivors"]  # the forked child (it sleeps on), and no process of a sandbox
    assert len(survivors) == 1 and survivors[0]["comm"] != "bwrap", report
    assert "/run/vtb-sandbox" not in survivors[0]["cmdline"], report
    assert "belongs to process" in (work / "refused").read_text()
    assert (work / "running").exists()  # the child's close removed nothing of the host's
