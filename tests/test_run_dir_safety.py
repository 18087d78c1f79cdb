"""The run directory under stress, through the real `vtb` command: one writer at a time, a full
disk that loses nothing, torn and duplicated lines, and a read-only folder."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import checkout_env, start_vtb
from support import cli
from support.together import together
from test_task_files import one_error_line, vtb

from vtb_agents.results import TaskResult
from vtb_agents.rundir.lock import RunDirBusy, run_dir_lock, run_dir_scope
from vtb_agents.rundir.store import ResultsStore, StorageError
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks

SLOW_AGENT = '''
import time
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

def build(tools):
    def answer(state):
        time.sleep(0.3)
        return {"messages": [*state["messages"], AIMessage("The number is 42.")]}
    return RunnableLambda(answer)
'''
HOLD_LOCK = """
import sys, time
from pathlib import Path
from vtb_agents.rundir.lock import run_dir_lock
with run_dir_lock(Path(sys.argv[1]), "test holder"):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def tasks_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    for i in range(5):
        write_task(root, f"t{i}")
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    return root


def agent_run(tasks_root: Path, out: Path, *extra: str) -> list[str]:
    """Arguments of `vtb run` with the slow agent (its module sits next to the tasks)."""
    return ["run", "--tasks", str(tasks_root), "--model", "agent:slow_agent:build", "--out", str(out), *extra]


def vtb_in(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`vtb` run from ``folder`` (so the slow agent's module imports), without debug tracebacks."""
    return cli.vtb(*args, cwd=folder, path=[folder], without=("VTB_DEBUG",), timeout=timeout)


def lines_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------- one writer

@pytest.mark.slow
def test_a_second_writer_is_refused_at_once_naming_the_holder(tasks_root, tmp_path):
    out = tmp_path / "run"
    assert vtb_in(tmp_path, *agent_run(tasks_root, out, "--limit", "2")).returncode == 0
    # the report was written under the run's own lock, never released in between (run_dir_scope)
    assert (out / "run.lock").read_text().endswith(", vtb run\n"), (out / "run.lock").read_text()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env=checkout_env())
    try:
        assert holder.stdout.readline().strip() == "locked"
        for args in (agent_run(tasks_root, out, "--resume"), ["grade", str(out)], ["report", str(out)]):
            result = vtb_in(tmp_path, *args)
            assert result.returncode == 2, result.stderr
            line = one_error_line(result)
            assert f"pid {holder.pid}" in line and "in use by another process" in line, line
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert [r["task_id"] for r in lines_of(out)] == ["t0", "t1"]


TRY_LOCK = """
import sys
from pathlib import Path
from vtb_agents.rundir.lock import RunDirBusy, run_dir_lock
try:
    with run_dir_lock(Path(sys.argv[1]), "probe"):
        print("taken")
except RunDirBusy as exc:
    print(exc)
"""


def another_process_locks(run_dir: Path) -> str:
    """What another process gets when it tries ``run_dir``'s lock: "taken", or the refusal."""
    probe = subprocess.run([sys.executable, "-c", TRY_LOCK, str(run_dir)], capture_output=True, text=True,
                           env=checkout_env(), timeout=60)
    assert probe.returncode == 0, probe.stderr
    return probe.stdout.strip()


def test_a_scope_keeps_the_lock_from_the_first_writer_in_it_to_its_end(tmp_path):
    run = tmp_path / "run"
    with run_dir_scope(run):  # the directory is made inside, as `vtb run` does
        run.mkdir()
        with run_dir_lock(run, "vtb run"), run_dir_lock(run, "vtb report"):  # taken again, not refused
            pass
        assert f"pid {os.getpid()}, vtb run" in another_process_locks(run)  # kept past the first block
        with run_dir_lock(run, "vtb report"):
            pass
        assert "in use by another process" in another_process_locks(run)
    assert another_process_locks(run) == "taken"
    # outside a scope, a second open in this process is refused
    with (run_dir_lock(run, "vtb run"), pytest.raises(RunDirBusy, match=f"pid {os.getpid()}, vtb run"),
          run_dir_lock(run, "vtb report")):
        pass
    assert another_process_locks(run) == "taken"  # released at the block's end


@pytest.mark.slow
def test_two_concurrent_resumes_never_duplicate_results(tasks_root, tmp_path):
    out = tmp_path / "run"
    args = agent_run(tasks_root, out, "--resume")
    first = start_vtb(*args, cwd=tmp_path, path=[tmp_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / "run.lock").exists() or not (out / "run.lock").read_text():
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.02)
    second = cli.vtb(*args, cwd=tmp_path, path=[tmp_path], timeout=120)
    first_err = first.communicate(timeout=120)[1]
    assert first.returncode == 0, first_err
    if second.returncode != 0:  # it started while the first one ran (the usual case)
        assert f"pid {first.pid}" in one_error_line(second)
    ids = [r["task_id"] for r in lines_of(out)]
    assert sorted(ids) == [f"t{i}" for i in range(5)]
    assert json.loads((out / "summary.json").read_text())["tasks"] == 5


def test_duplicate_lines_keep_the_first_record_and_say_so(tasks_root, tmp_path, caplog):
    out = tmp_path / "run"
    tasks = load_tasks(tasks_root)
    run_suite(tasks[:3], RunConfig(model="replay"), out)
    records = (out / "results.jsonl").read_text().splitlines()
    failed = json.loads(records[0])
    failed["grade"]["passed"] = False
    (out / "results.jsonl").write_text("\n".join([*records, json.dumps(failed), records[1]]) + "\n")
    with caplog.at_level(logging.WARNING):
        results, _ = ResultsStore(out).load()
    assert [r.task_id for r in results] == ["t0", "t1", "t2"] and results[0].grade.passed
    assert "2 duplicate line(s) for task(s) t0, t1 ignored" in caplog.text
    summary = run_suite(tasks, RunConfig(model="replay"), out, resume=True)
    assert summary.tasks == 5 and summary.apr == 1.0


# ----------------------------------------------------------------------------- a full disk

@pytest.fixture
def small_disk(tmp_path: Path):
    """A real 4 MiB tmpfs (needs root and mount permission; skipped otherwise)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; the filler file is returned (delete it to free the space)."""
    filler = disk / "filler"
    with filler.open("ab", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError:
                pass
    return filler


def test_a_failed_append_is_cut_back_to_the_last_whole_line(small_disk, tasks_root, tmp_path):
    run_suite(load_tasks(tasks_root)[:1], RunConfig(model="replay"), tmp_path / "ref")
    result = TaskResult.model_validate_json((tmp_path / "ref" / "results.jsonl").read_text())
    store = ResultsStore(small_disk)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "big").write_bytes(b"\0" * (free - 20_000))  # room for a few lines, then a full disk
    written = 0
    with pytest.raises(StorageError) as raised:
        while True:
            store.append(result.model_copy(update={"task_id": f"t{written}"}))
            written += 1
    assert raised.value.strerror.startswith("No space left on device")
    data = (small_disk / "results.jsonl").read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == written > 0
    assert len(store.load()[0]) == written


@pytest.mark.slow
def test_a_run_on_a_full_disk_stops_with_one_line_and_resumes_to_the_same_summary(small_disk, tasks_root, tmp_path):
    out = small_disk / "run"

    def on_the_small_disk() -> subprocess.CompletedProcess[str]:
        first = vtb_in(tmp_path, *agent_run(tasks_root, out, "--limit", "2"))
        assert first.returncode == 0, first.stderr
        filler = fill(small_disk)
        os.truncate(filler, filler.stat().st_size - 12 * 4096)  # room for SQLite's files and a result or two
        full = vtb_in(tmp_path, *agent_run(tasks_root, out, "--resume"))
        assert full.returncode == 2
        line = one_error_line(full)
        assert line.startswith("error: cannot write results: disk full (") and "--resume" in line, line
        assert "Traceback" not in full.stderr
        results = [TaskResult.model_validate(r) for r in lines_of(out)]  # every line whole
        assert 2 <= len(results) < 5
        fill(small_disk)  # now nothing at all is left: even opening the run fails, as one line
        full = vtb_in(tmp_path, *agent_run(tasks_root, out, "--resume"))
        assert one_error_line(full).startswith("error: cannot write results: disk full (")
        filler.unlink()
        return vtb_in(tmp_path, *agent_run(tasks_root, out, "--resume"))

    # the reference run beside the small disk's runs: another disk, another run directory
    reference, resumed = together(lambda: vtb_in(tmp_path, *agent_run(tasks_root, tmp_path / "reference")),
                                  on_the_small_disk)
    assert reference.returncode == 0, reference.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(r["task_id"] for r in lines_of(out)) == [f"t{i}" for i in range(5)]
    same = ("tasks", "apr", "ars", "by_category", "by_domain", "by_turncase")
    ours, theirs = (json.loads((d / "summary.json").read_text()) for d in (out, tmp_path / "reference"))
    assert {k: ours[k] for k in same} == {k: theirs[k] for k in same}


def test_a_glued_line_from_an_old_full_disk_is_repaired_on_resume(tasks_root, tmp_path):
    out = tmp_path / "run"
    run_suite(load_tasks(tasks_root)[:3], RunConfig(model="replay"), out)
    records = (out / "results.jsonl").read_text().splitlines()
    torn = records[1][: len(records[1]) // 2]  # what ENOSPC left before the fix, then t2 glued on
    (out / "results.jsonl").write_text(f"{records[0]}\n{torn}{records[2]}\n")
    report = vtb("report", str(out))
    assert "line 2 is not a valid result" in one_error_line(report) and "--resume" in one_error_line(report)
    summary = run_suite(load_tasks(tasks_root), RunConfig(model="replay"), out, resume=True)
    assert summary.tasks == 5 and summary.apr == 1.0
    assert (out / "results.jsonl.corrupt").read_text() == torn + "\n"
    assert sorted(r["task_id"] for r in lines_of(out)) == [f"t{i}" for i in range(5)]


# ----------------------------------------------------------------------------- read-only

@pytest.fixture
def read_only_view(tmp_path: Path):
    """A read-only bind mount of tmp_path/rw at tmp_path/ro (root can write anything else)."""
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    bound = subprocess.run(["mount", "--bind", str(rw), str(ro)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        yield rw, ro
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=True)


@pytest.mark.slow
def test_a_read_only_run_directory_gives_one_line_errors(read_only_view, tasks_root, tmp_path):
    rw, ro = read_only_view
    assert vtb_in(tmp_path, *agent_run(tasks_root, rw / "run", "--limit", "1")).returncode == 0
    refused = (agent_run(tasks_root, ro / "new"), agent_run(tasks_root, ro / "run", "--resume"),
               ["report", str(ro / "run")], ["grade", str(ro / "run")])
    *results, debug = together(  # side by side: each only reads the run (the view is read-only)
        *(lambda args=args: vtb_in(tmp_path, *args) for args in refused),
        lambda: vtb_in(tmp_path, "--debug", "report", str(ro / "run")))
    for args, result in zip(refused, results, strict=True):
        assert result.returncode == 2, (args, result.stderr)
        assert "Read-only file system" in one_error_line(result), result.stderr
    assert "Traceback" in debug.stderr
