"""The fork server (``sandbox/forkserver.py``, ``sandbox/zygote.py``): workers forked from one
zygote per host process are as confined from each other as from the host, the zygote never holds a
task's folder, and a zygote that dies fails its sandboxes with ``SandboxError``, never a hang.

The hostile suite (``test_sandbox_hostile.py``) runs every attack against forked workers too.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from support.proctree import tree

import vtb_agents
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import Limits, LocalSandbox, SandboxError
from vtb_agents.sandbox import forkserver
from vtb_agents.sandbox.forkserver import ForkServer, wanted
from vtb_agents.sandbox.isolation import python_roots
from vtb_agents.sandbox.local import choose_level

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fork_server_or_skip() -> Iterator[None]:
    """Fail (CI, which runs as root with bwrap) or skip where no fork server can run; each test
    ends with this process's fork servers closed."""
    try:
        level = choose_level("bwrap", strict=False, python=sys.executable)
    except SandboxError as exc:
        level = f"unavailable: {exc}"
    if level != "bwrap" or not wanted("bwrap"):
        message = f"no fork server here (bwrap {level}, root {os.geteuid() == 0})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    yield
    forkserver.close_all()


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (bwrap's pid 1 is reaped by this machine's
    init, which may never do so)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def zygote_pid(server: ForkServer) -> int:
    """The zygote's host pid: the first process under bwrap that is not bwrap (bwrap's pid 1)."""
    return next(p for p in tree(server.pid) if Path(f"/proc/{p}/comm").read_text().strip() != "bwrap")


def the_server() -> ForkServer:
    servers = list(forkserver._servers.values())
    assert len(servers) == 1
    return servers[0]


def test_sibling_tasks_see_none_of_each_others_files_processes_or_sockets(tmp_path: Path) -> None:
    with LocalSandbox(tmp_path / "a", isolation="bwrap") as a, LocalSandbox(tmp_path / "b", isolation="bwrap") as b:
        assert a.fork_server and b.fork_server
        b.put_file("secret.txt", b"B's secret")
        setup = b.run(
            "import os, socket, threading\n"
            "open('/tmp/b-tmp.txt', 'w').write('x'); open('/dev/shm/b-shm.txt', 'w').write('x')\n"
            "tcp = socket.socket(); tcp.bind(('127.0.0.1', 0)); tcp.listen()\n"
            "unix = socket.socket(socket.AF_UNIX); unix.bind('\\0vtb-b'); unix.listen()\n"
            "threading.Thread(target=tcp.accept, daemon=True).start()\n"
            "import pty\nterminal = pty.openpty()\n"
            "print(tcp.getsockname()[1])")
        assert setup.ok, setup.stderr
        port = int(setup.stdout)
        assert b.worker_pid is not None
        b_pids = tree(b.worker_pid)  # host pids of B's pid 1, supervisor and kernel
        assert len(b_pids) == 3
        code = (
            "import os, signal, socket\nseen = {}\n"
            f"for pid in {b_pids!r}:\n"
            "    try:\n        os.kill(pid, signal.SIGKILL); seen[pid] = 'sent'\n"
            "    except OSError as exc:\n        seen[pid] = type(exc).__name__\n"
            f"for path in ({str(b.workdir / 'secret.txt')!r}, '/tmp/b-tmp.txt', '/dev/shm/b-shm.txt'):\n"
            "    try:\n        open(path).read(); seen[path] = 'READ'\n"
            "    except OSError as exc:\n        seen[path] = type(exc).__name__\n"
            "for name, family, address in (('tcp', socket.AF_INET, ('127.0.0.1', "
            f"{port})), ('unix', socket.AF_UNIX, '\\0vtb-b')):\n"
            "    try:\n        socket.socket(family).connect(address); seen[name] = 'CONNECTED'\n"
            "    except OSError as exc:\n        seen[name] = type(exc).__name__\n"
            "seen['proc'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
            "seen['sandbox'] = sorted(os.listdir('/sandbox'))\n"
            "seen['pts'] = sorted(os.listdir('/dev/pts'))\n"
            "print(repr(seen))")
        result = a.run(code)
        assert result.ok, result.stderr
        seen = ast.literal_eval(result.stdout)
        assert {pid: seen.pop(pid) for pid in b_pids} == {pid: "ProcessLookupError" for pid in b_pids}
        assert seen == {str(b.workdir / "secret.txt"): "FileNotFoundError", "/tmp/b-tmp.txt": "FileNotFoundError",
                        "/dev/shm/b-shm.txt": "FileNotFoundError", "tcp": "ConnectionRefusedError",
                        "unix": "ConnectionRefusedError", "proc": [1, 2, 3], "sandbox": [],
                        "pts": ["ptmx"]}
        still = b.run("print(open('secret.txt').read(), sorted(os.listdir('/tmp')))")
        # B's /tmp: its own file, and the way to the interpreter if that lives under /tmp (bound back)
        in_tmp = {Path(r).relative_to("/tmp").parts[0] for r in python_roots(sys.executable) if r.startswith("/tmp/")}
        assert still.ok and still.stdout == f"B's secret {sorted({'b-tmp.txt', *in_tmp})}\n", still
        assert not still.state_lost, still


def test_the_zygote_holds_no_task_folder_and_no_task_fd(tmp_path: Path) -> None:
    with LocalSandbox(tmp_path / "a", isolation="bwrap") as a, LocalSandbox(tmp_path / "b", isolation="bwrap") as b:
        for sandbox in (a, b):
            sandbox.put_file("image.png", b"task data")
            assert sandbox.run("x = open('image.png', 'rb').read()").ok
        zygote = zygote_pid(the_server())
        mounts = Path(f"/proc/{zygote}/mountinfo").read_text().splitlines()
        assert not [m for m in mounts if m.split()[4] == "/sandbox"], mounts  # an empty directory there
        fds = {fd: os.readlink(f"/proc/{zygote}/fd/{fd}") for fd in os.listdir(f"/proc/{zygote}/fd")}
        assert not [t for t in fds.values() if str(tmp_path) in t], fds
        assert len([t for t in fds.values() if t.startswith("socket:")]) == 1, fds  # the host's, only
        # below the zygote (pid 1 of its namespace, which adopts each task's pid 1 when its first
        # process exits): the tasks' processes and nothing else (no first process left waiting)
        assert set(tree(zygote)[1:]) == {*tree(a.worker_pid or 0), *tree(b.worker_pid or 0)}
        assert zygote not in {a.worker_pid, b.worker_pid}


def test_a_dead_zygote_fails_its_sandboxes_and_a_new_one_serves_new_sandboxes(tmp_path: Path) -> None:
    with LocalSandbox(tmp_path / "a", isolation="bwrap") as sandbox:
        assert sandbox.run("x = 1").ok
        server = the_server()
        os.kill(zygote_pid(server), signal.SIGKILL)
        started = time.monotonic()
        worker = sandbox.worker_pid or 0
        while (server.alive() or running(worker)) and time.monotonic() - started < 10:
            time.sleep(0.01)  # its pid namespace dies with it, and every task's below
        with pytest.raises(SandboxError, match="fork server ended"):
            sandbox.run("print(x)")
        assert time.monotonic() - started < 30  # an error, not a hang
        assert not server.alive()
        with pytest.raises(SandboxError, match="fork server ended"):  # and again, never a silent restart
            sandbox.run("print(1)")
    with LocalSandbox(tmp_path / "b", isolation="bwrap") as fresh:
        result = fresh.run("print(6 * 7)")
        assert result.ok and result.stdout == "42\n", result
        assert the_server() is not server and the_server().alive()


def test_closing_ends_the_zygote_and_every_worker(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path / "a", isolation="bwrap")
    assert sandbox.run("x = 1").ok and sandbox.worker_pid is not None
    everything = tree(the_server().pid)
    assert sandbox.worker_pid in everything
    sandbox.close()
    forkserver.close_all()
    assert not [p for p in everything if running(p)]


FORKED_HOST = """
import os, sys
from pathlib import Path
from vtb_agents.sandbox import LocalSandbox, forkserver
with LocalSandbox(Path(sys.argv[1]) / "parent", isolation="bwrap") as sandbox:
    assert sandbox.run("x = 1").ok
    parent_server = next(iter(forkserver._servers.values()))
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a process executor's worker process, forked from the run's process
        with LocalSandbox(Path(sys.argv[1]) / "child", isolation="bwrap") as own:
            result = own.run("print(6 * 7)")
            server = next(iter(forkserver._servers.values()))
            os.write(write, f"{result.stdout.strip()} {server.pid}".encode())
        os._exit(0)
    os.close(write)
    answer, child_server = os.read(read, 100).decode().split()
    os.waitpid(child, 0)
    print(answer, child_server, parent_server.pid, parent_server.alive(), sandbox.run("print(x)").stdout.strip())
"""


def test_a_forked_host_process_gets_its_own_fork_server_and_leaves_none_behind(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", FORKED_HOST, str(tmp_path)], capture_output=True, text=True,
                          timeout=90, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    answer, child_server, parent_server, parent_alive, x = done.stdout.split()
    assert (answer, parent_alive, x) == ("42", "True", "1") and child_server != parent_server
    deadline = time.monotonic() + 10
    while running(int(child_server)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(int(child_server))


def test_a_task_whose_fork_server_dies_ends_as_sandbox_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a real run: the zygote dies between two code calls of one task."""
    monkeypatch.setenv("VTB_SANDBOX_ISOLATION", "bwrap")

    def code_call(code: str, n: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "python_image_processing", "args": {"code": code}, "id": f"c{n}"}])

    def script(messages: list[BaseMessage]) -> AIMessage:
        calls = sum(isinstance(m, AIMessage) for m in messages)
        if calls == 0:
            return code_call("x = 1", 0)
        if calls == 1:  # the first call ran in a forked worker: now its zygote dies
            server = the_server()
            workers = tree(server.pid)  # bwrap's, the zygote, every task's processes
            os.kill(zygote_pid(server), signal.SIGKILL)
            deadline = time.monotonic() + 10
            while any(running(p) for p in workers) and time.monotonic() < deadline:
                time.sleep(0.01)
            return code_call("print(x)", 1)
        return AIMessage("Final answer: 42.")

    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    summary = vtb_agents.evaluate(model=ScriptedChatModel(script=script), tasks=task,
                                  out=tmp_path / "run", judge="rule")
    assert summary.outcomes == {"sandbox_error": 1}
    error = summary.results[0].episode.error
    assert error is not None and error.startswith("SandboxError:") and "fork server ended" in error, error


def test_where_no_fork_server_starts_workers_start_as_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(forkserver, "_unavailable", None)  # restored after the test
    monkeypatch.setattr(forkserver, "_HERE", tmp_path / "missing")  # bwrap cannot bind zygote.py
    with LocalSandbox(tmp_path / "default", isolation="bwrap") as sandbox:
        assert sandbox.fork_server is True  # chosen by default, before any start was tried
        result = sandbox.run("print(6 * 7)")
        assert result.ok and result.stdout == "42\n" and sandbox.fork_server is False
    assert "no fork server" in caplog.text and "zygote.py" in (forkserver.unavailable() or "")
    assert not wanted("bwrap")
    with LocalSandbox(tmp_path / "asked", isolation="bwrap", fork_server=True) as asked, \
            pytest.raises(SandboxError, match="fork server cannot start here"):
        asked.run("pass")


def test_a_siblings_fork_flood_leaves_a_task_its_own_process_budget(tmp_path: Path) -> None:
    """RLIMIT_NPROC counts per task (each has its own user namespace), as with spawned workers."""
    limits = Limits(processes=32)
    with LocalSandbox(tmp_path / "a", isolation="bwrap", limits=limits) as a, \
            LocalSandbox(tmp_path / "b", isolation="bwrap", limits=limits) as b:
        flood = a.run("import os, time\nkids = []\ntry:\n    while len(kids) < 500:\n"
                      "        pid = os.fork()\n        if pid == 0:\n            time.sleep(60)\n"
                      "            os._exit(0)\n        kids.append(pid)\n"
                      "except OSError as exc:\n    print(len(kids), type(exc).__name__)", timeout=60)
        assert flood.ok and flood.stdout.split()[1] == "BlockingIOError", flood
        assert int(flood.stdout.split()[0]) < limits.processes
        sibling = b.run("import subprocess\nprint(subprocess.run(['echo', 'mine'], capture_output=True, "
                        "text=True).stdout.strip())")
        assert sibling.ok and sibling.stdout == "mine\n", sibling
