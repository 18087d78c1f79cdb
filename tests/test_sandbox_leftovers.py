"""Sandbox folders of a SIGKILLed run are removed when the next sandbox starts (they carry the
owning pid in their name); folders of running processes, and symlinks, are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support.cli import checkout_env
from test_task_files import vtb

HOST = """
from vtb_agents.sandbox import open_sandbox
with open_sandbox("local") as sandbox:
    sandbox.put_file("image_0.png", b"task image bytes")
    print(sandbox.workdir, flush=True)
    input()
"""


@pytest.mark.slow
def test_the_folder_of_a_killed_run_is_removed_at_the_next_start(tmp_path):
    host = subprocess.Popen([sys.executable, "-c", HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=checkout_env())
    workdir = Path(host.stdout.readline().strip())
    assert workdir.name.startswith(f"vtb-sandbox-{host.pid}-") and (workdir / "image_0.png").exists()
    host.send_signal(signal.SIGKILL)
    host.wait(timeout=30)
    assert workdir.exists(), "a killed run cannot clean up after itself"
    alive = Path(tempfile.mkdtemp(prefix=f"vtb-sandbox-{os.getpid()}-"))  # a running process's folder
    link = Path(tempfile.gettempdir()) / f"vtb-sandbox-{host.pid}-link"
    link.symlink_to(tmp_path)
    try:
        (tmp_path / "code.py").write_text("print('hi')")
        result = vtb("sandbox", "exec", "--code-file", str(tmp_path / "code.py"))
        assert result.returncode == 0, result.stderr
        assert not workdir.exists()
        assert alive.is_dir() and link.is_symlink() and tmp_path.is_dir()
    finally:
        alive.rmdir()
        link.unlink()


def test_sweeps_running_at_once_never_fail(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from vtb_agents.sandbox.leftovers import remove_leftovers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for i in range(200):
        (tmp_path / f"vtb-sandbox-{dead.pid}-{i}" / "sub").mkdir(parents=True)
    sweep = remove_leftovers.__wrapped__  # the uncached sweep: as two processes starting at once would run it
    with ThreadPoolExecutor(8) as pool:
        removed = list(pool.map(lambda _: sweep("vtb-sandbox-", str(tmp_path)), range(8)))
    expected = sorted(f"vtb-sandbox-{dead.pid}-{i}" for i in range(200))
    assert sorted(name for names in removed for name in names) == expected
    assert list(tmp_path.iterdir()) == []


def test_the_isolation_probe_folder_of_a_killed_host_is_removed_by_the_next_probe(tmp_path, monkeypatch):
    """A host killed while it probes the isolation levels (its first sandbox) leaves the probe's
    scratch folder; it carries the owner's pid too, and the next probe removes it."""
    from vtb_agents.sandbox import local

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"vtb-sandbox-probe-{dead.pid}-x"
    (left / "sub").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert local._probe("process", sys.executable, local.Limits()) is None
    assert list(tmp_path.iterdir()) == []  # the dead host's folder, and the probe's own
