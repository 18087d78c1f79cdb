"""The worker's control channel is out of the model's reach (worker.py: supervisor and kernel).

Model code runs in the kernel, which holds none of the host's pipes; whatever it writes to the
fds it does hold (its own pipe pair to the supervisor included) is validated and size-capped by
the supervisor. Forged, malformed or flooding frames end the call as a failed call with the state
reset; never an exception on the host, never an ungraded task, never host memory growth.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import vtb

from vtb_agents.sandbox import LocalSandbox


FORGE_EVERY_FD = """
import os, struct, sys
cmdline = open('/proc/self/cmdline', 'rb').read().split(b'\\0')
named = [int(a) for a in cmdline[3:5] if a.isdigit()]  # CTL_IN CTL_OUT as the host passed them
cell = int(sys._getframe().f_code.co_filename.strip('<>').split()[1])
frames = [struct.pack('>I', 2) + b'{}',
          struct.pack('>I', 2 ** 31) + b'x' * 64,
          b'garbage, not a frame',
          json_frame := None]
import json
body = json.dumps({'id': cell, 'ok': True, 'error': None, 'traceback': ''}).encode()
frames[-1] = struct.pack('>I', len(body)) + body
written = []
for fd in sorted(set(named + [int(n) for n in os.listdir('/proc/self/fd')])):
    if fd in (0, 1, 2):
        continue
    for frame in frames:
        try:
            os.write(fd, frame)
            written.append(fd)
        except OSError:
            pass
print('argv', sys.argv, 'named', named, 'written', sorted(set(written)))
"""

FORGE_VALID_REPLY = """
import json, os, struct, sys
cell = int(sys._getframe().f_code.co_filename.strip('<>').split()[1])
body = json.dumps({'id': cell, 'ok': True, 'error': None, 'traceback': ''}).encode()
for name in os.listdir('/proc/self/fd'):
    fd = int(name)
    if fd > 2:
        try:
            os.write(fd, struct.pack('>I', len(body)) + body)
        except OSError:
            pass
secret = 'state of the forging call'
"""

FLOOD = """
import os, struct
payload = struct.pack('>I', 30 << 20) + b'x' * (30 << 20)
for name in os.listdir('/proc/self/fd'):
    fd = int(name)
    if fd > 2:
        try:
            os.write(fd, payload)
        except OSError:
            pass
"""


@pytest.fixture(params=["bwrap", "fallback", "process"])
def sb(request, tmp_path):
    try:
        sandbox = LocalSandbox(tmp_path / "work", isolation=request.param)
    except Exception as exc:  # noqa: BLE001 (a level this machine lacks)
        pytest.skip(f"isolation {request.param} unavailable: {exc}")
    with sandbox:
        yield sandbox


def assert_fresh_and_working(sb: LocalSandbox) -> None:
    after = sb.run("print('kept' in globals(), 6 * 7)")
    assert after.ok and after.stdout == "False 42\n", after


def test_code_cannot_write_the_hosts_pipes_and_forged_frames_fail_its_own_call(sb: LocalSandbox) -> None:
    assert sb.run("kept = 1").ok
    result = sb.run(FORGE_EVERY_FD)
    assert not result.ok and result.state_lost
    assert "control channel" in (result.error or ""), result
    assert "Traceback" not in result.stderr
    assert_fresh_and_working(sb)


def test_the_kernel_holds_no_host_fd(sb: LocalSandbox) -> None:
    """The kernel's fds: stdin, the two capture pipes (and their saved copies), its own pair."""
    code = ("import os, stat\nkinds = []\nfor n in sorted(os.listdir('/proc/self/fd'), key=int):\n"
            "    try:\n        kinds.append((int(n), stat.S_ISFIFO(os.stat(int(n)).st_mode)))\n"
            "    except OSError:\n        pass\nprint(kinds)\nimport sys\nprint(sys.argv)")
    result = sb.run(code)
    assert result.ok, result
    fds = dict(eval(result.stdout.splitlines()[0]))  # noqa: S307 (our own printed list)
    assert len([fd for fd in fds if fd > 2]) <= 5, fds  # 2 saved stdout/stderr + 2 own pipes (+ listdir's)
    assert result.stdout.splitlines()[1].count(",") == 0  # sys.argv carries no fd numbers


def test_supervisor_fds_cannot_be_opened_through_proc(sb: LocalSandbox) -> None:
    """The supervisor is non-dumpable: its fds, memory and environment are out of the code's reach
    (at the confined levels; the "process" level, for debugging, runs code as the host user)."""
    if sb.isolation == "process":
        pytest.skip("the process level gives no such guarantee (docs/concepts/sandbox.md: debugging only)")
    code = ("import json, os\nppid = os.getppid()\nout = {}\n"
            "for name in ('fd', 'mem', 'environ'):\n"
            "    try:\n"
            "        os.listdir(f'/proc/{ppid}/fd') if name == 'fd' else open(f'/proc/{ppid}/{name}', 'rb').read(1)\n"
            "        out[name] = 'open'\n"
            "    except OSError as exc:\n        out[name] = type(exc).__name__\nprint(json.dumps(out))")
    result = sb.run(code)
    assert result.ok, result
    assert json.loads(result.stdout) == {"fd": "PermissionError", "mem": "PermissionError",
                                         "environ": "PermissionError"}


def test_a_forged_valid_reply_never_desynchronises_the_next_call(sb: LocalSandbox) -> None:
    forged = sb.run(FORGE_VALID_REPLY)
    assert forged.ok  # the forged reply answered its own call: the model lying to itself
    for n in range(3):  # the real reply that followed answers none of the next calls
        following = sb.run(f"print('call', {n}, secret)")
        assert following.ok and following.stdout == f"call {n} state of the forging call\n", following
        assert not following.state_lost


def _vm(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def test_a_30_mb_forged_frame_costs_the_host_no_memory(sb: LocalSandbox) -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    except OSError as exc:
        pytest.skip(f"cannot reset the RSS peak here: {exc}")
    before = _vm("VmRSS")
    result = sb.run(FLOOD, timeout=60)
    peak = _vm("VmHWM")
    assert not result.ok and result.state_lost and "control channel" in (result.error or ""), result
    assert peak - before < 32 << 20, f"host RSS grew by {(peak - before) >> 20} MiB"
    assert_fresh_and_working(sb)


def test_vtb_sandbox_exec_of_forging_code_is_a_failed_call(tmp_path: Path) -> None:
    code_file = tmp_path / "forge.py"
    code_file.write_text(FORGE_EVERY_FD + FLOOD)
    done = vtb("sandbox", "exec", "--code-file", code_file, "--json", timeout=120)
    assert done.returncode == 1, done.stderr  # the exit status of any failed call
    assert "Traceback" not in done.stdout + done.stderr
    payload = json.loads(done.stdout)
    assert payload["ok"] is False and payload["state_lost"] is True
    assert "control channel" in payload["error"]


@pytest.mark.slow
def test_a_task_whose_code_forges_the_channel_is_graded(tmp_path: Path) -> None:
    """End to end (`vtb run`, replay agent, real graph and sandbox): the forging call fails, the
    episode goes on, the task is answered and graded."""
    root = tmp_path / "tasks"
    folder = write_task(root, "t-forge")
    task = json.loads((folder / "task.json").read_text())
    task["turns"][0]["trajectory"] = [{"tool": "python_image_processing", "args": {"code": FORGE_EVERY_FD}},
                                      {"tool": "python_interpreter", "args": {"code": FLOOD}},
                                      {"tool": "python_interpreter", "args": {"code": "print(6 * 7)"}}]
    (folder / "task.json").write_text(json.dumps(task))
    done = vtb("run", "--tasks", root, "--model", "replay", "--out", tmp_path / "run")
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    result = json.loads(line)
    assert result["outcome"] == "answered" and result["grade"]["graded"] is True
    calls = result["episode"]["turns"][0]["tool_calls"]
    assert [c["ok"] for c in calls] == [False, False, True]
    assert "control channel" in json.loads(calls[0]["output"])["error"]
    assert json.loads(calls[2]["output"])["stdout"] == "42\n"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["ungraded"] == 0 and summary["complete"] is True
