"""The sandbox's memory cgroup: finding our own cgroup, joining before exec, clean removal."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vtb_agents.sandbox.cgroup import (
    CgroupUnavailable,
    join_command,
    open_memory_cgroup,
    own_memory_cgroup,
    remove_orphans,
)

HYBRID = "4:memory:/process_api/abc\n1:cpu:/\n0::/\n"


def test_own_cgroup_prefers_the_v1_memory_hierarchy(tmp_path: Path) -> None:
    assert own_memory_cgroup(HYBRID, tmp_path) == (tmp_path / "memory" / "process_api" / "abc", "v1")


def test_own_cgroup_on_v2_uses_the_unified_mount(tmp_path: Path) -> None:
    text = "0::/user.slice/user-1000.slice/session-2.scope\n"
    assert own_memory_cgroup(text, tmp_path)[0] == tmp_path / "unified" / "user.slice" / \
        "user-1000.slice" / "session-2.scope"
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    assert own_memory_cgroup(text, tmp_path) == (
        tmp_path / "user.slice" / "user-1000.slice" / "session-2.scope", "v2")


def test_no_memory_controller_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="no memory controller"):
        own_memory_cgroup("1:cpu:/\n", tmp_path)


def test_a_cgroup_we_cannot_create_is_unavailable_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="cannot create a cgroup under .*No such file"):
        open_memory_cgroup(1 << 30, fs=tmp_path)  # our cgroup's directory does not exist there
    with pytest.raises(ValueError, match="positive"):
        open_memory_cgroup(0, fs=tmp_path)


def test_join_command_enters_the_cgroup_before_the_program_starts(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"  # a plain file stands in for the kernel's
    command = [sys.executable, "-c", "import os; print(os.getpid())"]
    done = subprocess.run(join_command(procs, command), capture_output=True, text=True, check=True)
    assert procs.read_text().strip() == done.stdout.strip()  # the same process, after exec
    failed = subprocess.run(join_command(tmp_path / "missing" / "cgroup.procs", command),
                            capture_output=True, text=True)
    assert failed.returncode == 125 and failed.stdout == ""


def test_a_real_cgroup_holds_its_limit_and_is_removed_on_close() -> None:
    try:
        group = open_memory_cgroup(256 << 20)
    except CgroupUnavailable as exc:
        pytest.skip(f"no memory cgroup here: {exc}")
    limit_file = "memory.limit_in_bytes" if group.version == "v1" else "memory.max"
    assert int((group.path / limit_file).read_text()) == 256 << 20
    sleeper = subprocess.Popen(join_command(group.procs, ["sleep", "300"]))
    try:
        for _ in range(200):
            if group.pids():
                break
            time.sleep(0.01)
        assert group.pids() == [sleeper.pid]
        group.close()
        assert sleeper.wait(timeout=10) == -9 and not group.path.exists()
        group.close()  # idempotent
    finally:
        sleeper.kill()
        sleeper.wait()


def test_cgroups_left_by_dead_hosts_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    for name in (f"vtb-sandbox-{dead.pid}-aaaa", f"vtb-sandbox-{os.getpid()}-bbbb", "other-group"):
        (tmp_path / name).mkdir()
    assert remove_orphans(tmp_path) == [f"vtb-sandbox-{dead.pid}-aaaa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-group", f"vtb-sandbox-{os.getpid()}-bbbb"]


def test_processes_left_in_a_dead_hosts_cgroup_are_killed() -> None:
    try:
        group = open_memory_cgroup(256 << 20)
    except CgroupUnavailable as exc:
        pytest.skip(f"no memory cgroup here: {exc}")
    # in a parent of its own: every sandbox starting on this machine sweeps the shared parent, and would
    # remove the orphan before this test's own sweep (the same code, but then this call finds nothing)
    private = group.path.parent / f"vtb-test-orphans-{os.getpid()}-{time.monotonic_ns()}"
    group.close()
    private.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = private / f"vtb-sandbox-{dead.pid}-cccc"  # as if a host that has died had made it
    orphan.mkdir()
    leftover = subprocess.Popen(join_command(orphan / "cgroup.procs", ["sleep", "300"]))
    try:
        while not (orphan / "cgroup.procs").read_text().split():
            time.sleep(0.01)
        assert remove_orphans(private) == [orphan.name]
        assert leftover.wait(timeout=10) == -9 and not orphan.exists()
    finally:
        leftover.kill()
        leftover.wait()
        if orphan.exists():
            orphan.rmdir()
        private.rmdir()
