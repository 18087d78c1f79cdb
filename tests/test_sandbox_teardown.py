"""What model code leaves in its working directory never becomes an infrastructure failure.

Through the CLI with the real sandbox and a scripted model on a local OpenAI-compatible server:
code that leaves 1,200 nested folders, a path past PATH_MAX, a chmod-000 folder, a FIFO and a
socket gets an ordinary tool result, its task is graded as answered, nothing stays in the temp
directory, and a run right after on the same machine is unaffected, even when a killed run left
such a folder behind for its leftover sweep.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import write_task
from support.openai_server import OpenAIServer
from support.cli import checkout_env, openai_env, vtb, vtb_command
from test_outcomes import ANSWER, RUBRICS, results_of, summary_of
from vtb_agents.sandbox.removal import remove_tree

pytestmark = pytest.mark.timeout(300)
DEPTH, LONG_LEVELS = 1200, 25  # 25 folders of 200-character names: a path of 5,025 characters

LITTER = f"""
import os, socket
base = os.getcwd()
for _ in range({DEPTH}):
    os.mkdir("d")
    os.chdir("d")
open("bottom.txt", "w").write("deep")
os.chdir(base)
os.mkdir("long")
os.chdir("long")
for _ in range({LONG_LEVELS}):
    os.mkdir("p" * 200)
    os.chdir("p" * 200)
open("far.txt", "w").write("far")
os.chdir(base)
os.makedirs("locked/inner")
open("locked/inner/data.txt", "w").write("x")
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
os.mkfifo("pipe")
socket.socket(socket.AF_UNIX).bind("sock")
print("littered")
"""


@pytest.fixture
def tmpdir_of_runs(tmp_path: Path) -> Iterator[Path]:
    """The runs' TMPDIR; removed afterwards even if a test fails (deep litter would break pytest's
    own clean-up of old temporary folders, which uses ``shutil.rmtree``)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    yield folder
    remove_tree(folder)




def littering_model(body: dict[str, Any]) -> Any:
    """Litter the working directory with one code call, then answer."""
    if body["messages"][-1]["role"] == "tool":
        return ANSWER
    return {"content": None, "tool_calls": [{"name": "python_interpreter", "arguments": {"code": LITTER}}]}


def tool_results(server: OpenAIServer) -> list[dict[str, Any]]:
    """The code tool results the model read back, as JSON."""
    return [json.loads(m["content"]) for body in server.requests for m in body["messages"][-1:]
            if m["role"] == "tool"]


def assert_answered(run: Path, done: subprocess.CompletedProcess[str], task_ids: list[str]) -> None:
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summary_of(run)
    assert summary["outcomes"] == {"answered": len(task_ids)}, summary
    assert summary["infrastructure_errors"] == {"count": 0, "task_ids": []}
    results = results_of(run)
    assert sorted(results) == sorted(task_ids)
    for result in results.values():
        assert result["outcome"] == "answered" and result["grade"]["passed"] is True, result


@pytest.mark.slow
def test_litter_is_graded_as_answered_and_the_next_run_is_unaffected(tmp_path: Path, tmpdir_of_runs: Path) -> None:
    tasks, tmpdir = tmp_path / "tasks", tmpdir_of_runs
    write_task(tasks, "t-litter", turns=[{"prompt": "LITTER: what number is printed?", "images": [0],
                                          "golden_answer": ANSWER, "rubrics": RUBRICS}])
    with OpenAIServer(littering_model) as server:
        first = vtb("run", "--tasks", str(tasks), "--model", "openai:scripted", "--judge", "rule",
                    "--out", str(tmp_path / "run1"), env=openai_env(server.base_url, "test-key", TMPDIR=str(tmpdir)),
                   timeout=240)
        assert_answered(tmp_path / "run1", first, ["t-litter"])
        [observation] = tool_results(server)
        assert observation["ok"] is True and observation["stdout"] == "littered\n", observation
        deep = f"{'d/' * DEPTH}bottom.txt"
        far = f"long/{('p' * 200 + '/') * LONG_LEVELS}far.txt"
        assert len(far) > os.pathconf("/", "PC_PATH_MAX")
        assert {deep, far} <= set(observation["new_files"])
        assert list(tmpdir.iterdir()) == [], "the sandbox folder must not outlive its task"

        second = vtb("run", "--tasks", str(tasks), "--model", "openai:scripted", "--judge", "rule",
                     "--out", str(tmp_path / "run2"), env=openai_env(server.base_url, "test-key", TMPDIR=str(tmpdir)),
                   timeout=240)
    assert_answered(tmp_path / "run2", second, ["t-litter"])
    assert list(tmpdir.iterdir()) == []


HOST = f"""
from vtb_agents.sandbox import open_sandbox
with open_sandbox("local") as sandbox:
    print(sandbox.workdir, flush=True)
    try:
        sandbox.run({LITTER!r})
    finally:  # killed here, littered, whatever the call returned
        print("littered", flush=True)
        input()
"""


@pytest.mark.slow
def test_a_killed_runs_litter_is_swept_without_failing_the_next_run(tmp_path: Path, tmpdir_of_runs: Path) -> None:
    tasks, tmpdir = tmp_path / "tasks", tmpdir_of_runs
    host = subprocess.Popen([sys.executable, "-c", HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=checkout_env(TMPDIR=str(tmpdir)))
    assert host.stdout is not None
    left = Path(host.stdout.readline().strip())
    assert host.stdout.readline() == "littered\n"
    host.send_signal(signal.SIGKILL)
    host.wait(timeout=30)
    assert left.parent == tmpdir and (left / "locked").is_dir() and (left / "pipe").exists()

    for keyword in ("A", "B"):
        write_task(tasks, f"t-{keyword.lower()}", turns=[{"prompt": f"{keyword}: what number is printed?",
                                                          "images": [0], "golden_answer": ANSWER,
                                                          "rubrics": RUBRICS}])
    with OpenAIServer(lambda body: ANSWER) as server:
        done = vtb("run", "--tasks", str(tasks), "--model", "openai:scripted", "--judge", "rule",
                   "--out", str(tmp_path / "run"), env=openai_env(server.base_url, "test-key", TMPDIR=str(tmpdir)),
                   timeout=240)
    assert_answered(tmp_path / "run", done, ["t-a", "t-b"])
    assert list(tmpdir.iterdir()) == [], "the sweep removes what the killed run's code left"


LOCK_OUT = """
import os
os.makedirs("locked/inner")
open("locked/inner/data.txt", "w").write("x")
os.chmod("locked", 0)
print("locked")
"""
WITHOUT_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
               "--inh-caps", "-dac_override,-dac_read_search"]


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0,
                    reason="needs root and setpriv to run the host without CAP_DAC_OVERRIDE")
@pytest.mark.slow
def test_a_folder_the_host_cannot_read_is_a_failed_tool_result(tmp_path: Path, tmpdir_of_runs: Path) -> None:
    """A host user without CAP_DAC_OVERRIDE (any user but root) cannot list a chmod-000 folder: the
    call's result says so, the task goes on to its answer, and teardown restores the permission
    to remove it. Root is stripped of that capability, and the sandbox runs as the host user."""
    tasks, tmpdir = tmp_path / "tasks", tmpdir_of_runs
    write_task(tasks, "t-locked", turns=[{"prompt": "LOCK: what number is printed?", "images": [0],
                                          "golden_answer": ANSWER, "rubrics": RUBRICS}])

    def respond(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return ANSWER
        return {"content": None, "tool_calls": [{"name": "python_interpreter", "arguments": {"code": LOCK_OUT}}]}

    with OpenAIServer(respond) as server:
        env = checkout_env(**openai_env(server.base_url, "test-key", TMPDIR=str(tmpdir),
                                        VTB_SANDBOX_ISOLATION="process"))
        done = subprocess.run([*WITHOUT_DAC, *vtb_command("run", "--tasks", tasks, "--model", "openai:scripted",
                                                          "--judge", "rule", "--out", tmp_path / "run")],
                              capture_output=True, text=True, timeout=240, env=env)
    assert_answered(tmp_path / "run", done, ["t-locked"])
    [observation] = tool_results(server)
    assert observation["ok"] is False and observation["stdout"] == "locked\n", observation
    assert "cannot read these folders of the working directory: 'locked' (Permission denied)" in observation["error"]
    assert list(tmpdir.iterdir()) == []


def nest(folder: Path, depth: int) -> None:
    """``depth`` nested folders ``d`` under ``folder``, a file at the bottom (no path is built)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)


def immutable(path: Path, on: bool) -> bool:
    """Set or clear the immutable attribute (``chattr``); False where this machine cannot."""
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


def test_the_sweep_logs_what_it_cannot_remove_and_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from vtb_agents.sandbox.leftovers import remove_leftovers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stuck, deep = tmp_path / f"vtb-sandbox-{dead.pid}-stuck", tmp_path / f"vtb-sandbox-{dead.pid}-deep"
    stuck.mkdir()
    deep.mkdir()
    nest(deep, DEPTH)
    (stuck / "kept.txt").write_text("x")
    if not immutable(stuck / "kept.txt", True):
        pytest.skip("chattr +i is not available here (needs root and a file system that has it)")
    try:
        with caplog.at_level("WARNING", logger="vtb_agents.sandbox.leftovers"):
            removed = remove_leftovers.__wrapped__("vtb-sandbox-", str(tmp_path))
        assert removed == [deep.name]
        assert not deep.exists() and (stuck / "kept.txt").exists()
        assert f"could not remove the sandbox folder {stuck}" in caplog.text
        assert "kept.txt: Operation not permitted" in caplog.text
    finally:
        immutable(stuck / "kept.txt", False)


def test_removal_gives_up_at_its_deadline_and_the_caller_only_logs(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    from vtb_agents.sandbox.removal import RemovalError, discard_tree

    folder = tmp_path / "work"
    folder.mkdir()
    nest(folder, 50)
    with pytest.raises(RemovalError, match=r"gave up removing .* after 0 s"):
        remove_tree(folder, timeout_s=0)
    assert (folder / "d").is_dir()
    with caplog.at_level("WARNING", logger="vtb_agents.sandbox.removal"):
        assert discard_tree(folder, "the test folder", timeout_s=0) is False
    assert f"could not remove the test folder {folder}: gave up" in caplog.text
    assert discard_tree(folder, "the test folder") is True and not folder.exists()
