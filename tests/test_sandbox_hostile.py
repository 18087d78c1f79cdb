"""Hostile model code against real sandboxes: each attack is contained, reported, and the next
call of the same episode still works.

Every test runs at the "bwrap" level; the key ones also at "fallback", and at "bwrap" both with
workers forked by the fork server (``forkserver.py``, as root) and started as programs. With ``CI=true`` a level that
cannot start here is a failure, not a skip (CI installs bubblewrap and runs as root).
"""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from vtb_agents.sandbox import Limits, LocalSandbox, SandboxError
from vtb_agents.sandbox.cgroup import CgroupUnavailable, open_memory_cgroup
from vtb_agents.sandbox.isolation import python_roots
from vtb_agents.sandbox.forkserver import ENV_VAR as FORK_SERVER_ENV
from vtb_agents.sandbox.forkserver import wanted
from vtb_agents.sandbox.local import choose_level

pytestmark = pytest.mark.timeout(90)
PROJECT = Path(__file__).resolve().parents[1]
BOTH = ["bwrap", "fallback"]


def _level_or_skip(level: str) -> None:
    """Fail (CI) or skip (elsewhere) when ``level`` cannot start on this machine."""
    try:
        choose_level(level, strict=False, python=sys.executable)
    except SandboxError as exc:
        message = f"isolation level {level!r} unavailable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _variant(param: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The level of a fixture's ``param``: "bwrap" forks its workers from the fork server where it
    can (as root); "bwrap-spawn" starts each worker as a program (bwrap itself), as elsewhere."""
    name = param.removesuffix("-spawn")
    _level_or_skip(name)
    if param == "bwrap-spawn":
        monkeypatch.setenv(FORK_SERVER_ENV, "0")
    elif name == "bwrap" and not wanted(name):
        pytest.skip("no fork server here (it needs root): the spawn variant covers bwrap")
    return name


@pytest.fixture(params=[*BOTH, "bwrap-spawn"])
def level(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return _variant(str(request.param), monkeypatch)


@pytest.fixture(params=["bwrap", "bwrap-spawn"])
def bwrap_level(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return _variant(str(request.param), monkeypatch)


@pytest.fixture
def sb(level: str, tmp_path: Path) -> Iterator[LocalSandbox]:
    with LocalSandbox(tmp_path / "work", isolation=level) as sandbox:
        assert sandbox.isolation == level and sandbox.fork_server == wanted(level)
        yield sandbox


def assert_alive(sb: LocalSandbox) -> None:
    """The episode goes on: the next call in the same sandbox works."""
    result = sb.run("print(6 * 7)")
    assert result.ok and result.stdout == "42\n", (result.error, result.stderr)


def probe_paths(sb: LocalSandbox, paths: list[str]) -> dict[str, str]:
    """For each path, "READ" if the sandbox can read it, else the exception's type name."""
    code = (
        "import json\nout = {}\n"
        f"for p in {paths!r}:\n"
        "    try:\n        open(p, 'rb').read(1); out[p] = 'READ'\n"
        "    except Exception as exc:\n        out[p] = type(exc).__name__\n"
        "print(json.dumps(out))"
    )
    result = sb.run(code)
    assert result.ok, result.stderr
    return dict(json.loads(result.stdout))


def uid_processes(uid: int, under: int) -> set[int]:
    """Host processes with real uid ``uid`` that descend from process ``under`` (one sandbox's own:
    other tests' sandboxes on the machine, also uid 65534, are not counted)."""
    parents: dict[int, int] = {}
    uids: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            parents[int(entry)], uids[int(entry)] = int(fields["PPid"]), int(fields["Uid"].split()[0])
    found: set[int] = set()
    for pid in parents:
        current = pid
        while current in parents and current != under:
            current = parents[current]
        if current == under and uids[pid] == uid:
            found.add(pid)
    return found


def test_host_files_are_out_of_reach(sb: LocalSandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"  # next to the workdir, outside it
    secret.write_text("top secret")
    paths = [str(secret), "/root/.bashrc", str(PROJECT / "pyproject.toml"),
             str(PROJECT / "vtb_agents" / "__init__.py"), "../secret.txt"]
    seen = probe_paths(sb, paths)
    assert all(v in ("FileNotFoundError", "PermissionError") for v in seen.values()), seen
    assert_alive(sb)


def test_fallback_hides_the_checkout_of_a_venv_elsewhere(tmp_path: Path) -> None:
    """The host runs from a venv outside the checkout it imports the package from (a worktree
    whose .venv links to another checkout's venv, or PYTHONPATH): the fallback still hides that
    checkout (it used to mask only the folder around the venv, and showed the checkout)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    site_dirs = [d for d in sys.path if d.endswith("site-packages")]
    code = ("import sys\nfrom vtb_agents.sandbox import LocalSandbox\n"
            "with LocalSandbox(sys.argv[1], isolation='fallback') as sb:\n"
            "    r = sb.run('try:\\n open(%r).read(); print(\"READ\")\\n"
            "except OSError as e:\\n print(type(e).__name__)' % sys.argv[2])\n"
            "    print(r.stdout.strip(), r.ok, r.stderr)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), *site_dirs])}
    (tmp_path / "work").mkdir()
    out = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", code, str(tmp_path / "work"),
                          str(PROJECT / "pyproject.toml")], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] in (["FileNotFoundError", "True"], ["PermissionError", "True"]), out.stdout


def test_bwrap_root_holds_only_the_minimal_tree(bwrap_level: str, tmp_path: Path) -> None:
    with LocalSandbox(tmp_path / "work", isolation=bwrap_level) as sb:
        result = sb.run("import os\nprint(repr((sorted(os.listdir('/')), sorted(os.listdir('/etc')),"
                        " os.listdir('/root'), os.getcwd(), os.getuid())))")
        assert result.ok, result.stderr
        top, etc, root, cwd, uid = ast.literal_eval(result.stdout)
        # The interpreter (a venv and its base install) is bound read-only at its real path, so
        # the first component of that path shows up wherever the checkout lives (/work, /check...).
        interpreter_tops = {Path(root).parts[1] for root in python_roots(sys.executable)}
        assert set(top) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "root",
                            "run", "sandbox", "sbin", "tmp", "usr"} | interpreter_tops
        # /root shows only the folders on the way to an interpreter root under it (a pyenv, a venv)
        in_root = {Path(r).relative_to("/root").parts[0] for r in python_roots(sys.executable)
                   if r.startswith("/root/")}
        assert "shadow" not in etc and "hostname" not in etc and set(root) == in_root
        assert cwd == "/sandbox" and uid == (65534 if os.geteuid() == 0 else os.geteuid())
        users = sb.run("print(open('/etc/passwd').read())").stdout.split()
        assert [line.split(":")[0] for line in users] == ["root", "sandbox"]  # not the host's
        seen = probe_paths(sb, ["/etc/shadow", "/etc/hostname", "/home/x"])
        assert "READ" not in seen.values(), seen


def test_writes_outside_the_workdir_stay_private_or_fail(sb: LocalSandbox, tmp_path: Path) -> None:
    name = f"vtb-hostile-{uuid.uuid4().hex}"
    code = (
        "import os\nout = []\n"
        f"open('/tmp/{name}', 'w').write('x'); out.append('tmp-ok')\n"
        f"for p in ['/usr/{name}', '../{name}', '/{name}', {str(PROJECT / name)!r}]:\n"
        "    try:\n        open(p, 'w').write('x'); out.append('WROTE ' + p)\n"
        "    except OSError as exc:\n        out.append(type(exc).__name__)\n"
        "print(out)"
    )
    result = sb.run(code)
    assert result.ok, result.stderr
    assert "tmp-ok" in result.stdout and "WROTE" not in result.stdout, result.stdout
    for host_path in (Path("/tmp") / name, Path("/usr") / name, tmp_path / name, Path("/") / name,
                      PROJECT / name):
        assert not host_path.exists()
    assert_alive(sb)


def test_environment_and_proc_environ_hold_no_secret(level: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTB_HOSTILE_SECRET", "s3cr3t-7c1f")
    with LocalSandbox(tmp_path / "work", isolation=level) as sb:
        code = (
            "import os, glob\nhits = []\n"
            "hits += [k for k, v in os.environ.items() if 's3cr3t' in k + v]\n"
            f"for path in glob.glob('/proc/*/environ') + ['/proc/{os.getpid()}/environ',"
            f" '/proc/{os.getppid()}/environ', '/proc/1/environ']:\n"
            "    try:\n        data = open(path, 'rb').read()\n"
            "    except OSError:\n        continue\n"
            "    if b's3cr3t' in data:\n        hits.append(path)\n"
            "print(repr((hits, sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))))"
        )
        result = sb.run(code)
        assert result.ok, result.stderr
        hits, pids = ast.literal_eval(result.stdout)
        assert hits == []
        assert os.getpid() not in pids and max(pids) < 100  # a pid namespace of its own
        assert_alive(sb)


def test_network_is_unreachable(sb: LocalSandbox) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port, accepted, stop = server.getsockname()[1], [], threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        code = (
            "import socket\nout = []\n"
            f"for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('10.0.2.2', 80)]:\n"
            "    try:\n        socket.create_connection((host, port), timeout=2).close(); out.append('CONNECTED')\n"
            "    except OSError as exc:\n        out.append(type(exc).__name__)\n"
            "try:\n    socket.getaddrinfo('example.com', 80); out.append('RESOLVED')\n"
            "except OSError as exc:\n    out.append(type(exc).__name__)\n"
            "print(out)"
        )
        result = sb.run(code, timeout=30)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert result.ok, result.stderr
    assert "CONNECTED" not in result.stdout and "RESOLVED" not in result.stdout, result.stdout
    assert accepted == []
    assert_alive(sb)


@pytest.mark.slow
def test_infinite_loop_times_out(sb: LocalSandbox) -> None:
    result = sb.run("while True:\n    pass", timeout=1)
    assert not result.ok and result.state_lost
    assert result.error is not None and result.error.startswith("timeout after 1 s")
    assert_alive(sb)


@pytest.mark.slow
def test_memory_bomb_is_stopped(sb: LocalSandbox) -> None:
    result = sb.run("hog = bytearray(8 << 30)")
    assert not result.ok and result.error is not None and result.error.startswith("MemoryError")
    gradual = sb.run("chunks = []\nwhile True:\n    chunks.append(bytearray(256 << 20))", timeout=60)
    assert not gradual.ok and gradual.error is not None
    assert gradual.error.startswith("MemoryError") or "killed" in gradual.error
    assert_alive(sb)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fork", "spawn"])
def test_fork_flood_is_capped(level: str, how: str, tmp_path: Path) -> None:
    limits = Limits(processes=64)
    start = ("pid = os.fork()\nif pid == 0:\n    time.sleep(60)\n    os._exit(0)" if how == "fork"
             else "subprocess.Popen(['sleep', '60'])")
    code = (
        "import os, subprocess, time\nn = 0\ntry:\n    while n < 2000:\n"
        + "".join(f"        {line}\n" for line in start.splitlines())
        + "        n += 1\nexcept OSError as exc:\n    print('stopped after', n, type(exc).__name__)\n"
    )
    with LocalSandbox(tmp_path / "work", isolation=level, limits=limits) as sb:
        result = sb.run(code, timeout=60)
        assert result.ok, result.stderr
        words = result.stdout.split()
        assert words[:2] == ["stopped", "after"] and int(words[2]) < limits.processes, result.stdout
        assert words[3] == "BlockingIOError"
        if os.geteuid() == 0:  # the kernel compares the count before adding the new task: +1
            assert sb.worker_pid is not None
            started = uid_processes(65534, under=sb.worker_pid)
            assert limits.processes // 2 < len(started) <= limits.processes + 1
        assert_alive(sb)
    if os.geteuid() == 0:  # closing the sandbox ends every process it started
        deadline = time.monotonic() + 10
        while (alive := {pid for pid in started if Path(f"/proc/{pid}").exists()}) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive


def _memory_cgroup_or_skip() -> None:
    """Skip when sandboxes cannot get a memory cgroup here: a property of the machine (root with a
    writable cgroup v1 memory hierarchy, or v2 delegation) that ``make`` cannot install."""
    try:
        open_memory_cgroup(1 << 30).close()
    except CgroupUnavailable as exc:
        pytest.skip(f"no memory cgroup for sandboxes on this machine: {exc}")


@pytest.mark.slow
def test_memory_spread_over_many_processes_is_capped_together(level: str, tmp_path: Path) -> None:
    """Each process stays under RLIMIT_AS; only the sandbox's cgroup sees what they hold together."""
    _memory_cgroup_or_skip()
    with LocalSandbox(tmp_path / "work", isolation=level,
                      limits=Limits(memory_bytes=512 << 20)) as sb:
        assert sb.memory_cap == "cgroup v1, 512 MiB" or sb.memory_cap.startswith("cgroup v2")
        code = ("import subprocess, sys\n"
                "hog = 'x = b\"x\" * (300 << 20)\\nimport time\\ntime.sleep(2)'\n"
                "procs = [subprocess.Popen([sys.executable, '-c', hog]) for _ in range(4)]\n"
                "print([p.wait() for p in procs])")
        result = sb.run(code, timeout=60)
        if result.ok:  # the kernel's OOM killer picked some of the hogs
            codes = ast.literal_eval(result.stdout)
            assert -9 in codes and len(codes) == 4, codes
        else:  # or the worker itself
            assert result.error is not None and "SIGKILL" in result.error, result.error
        assert_alive(sb)


def test_processes_that_leave_the_group_die_with_the_sandbox(tmp_path: Path) -> None:
    """At the "process" level a setsid daemon escapes the worker's process group, not its cgroup."""
    _memory_cgroup_or_skip()
    with LocalSandbox(tmp_path / "work", isolation="process") as sb:
        started = sb.run("import subprocess, sys\n"
                         "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                         " start_new_session=True)\nprint(p.pid)")
        assert started.ok, started.stderr
        daemon = int(started.stdout)
    deadline = time.monotonic() + 10
    while _running(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(daemon)


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_kernel_attack_surface_calls_are_denied_and_ordinary_work_goes_on(sb: LocalSandbox) -> None:
    """seccomp: new namespaces, ptrace, keyrings, eBPF and the x32 ABI fail; threads, subprocesses
    and multiprocessing (plain clone) still work."""
    code = (
        "import ctypes, errno, json\nlibc = ctypes.CDLL(None, use_errno=True)\nout = {}\n"
        "calls = {'unshare(NEWUSER)': lambda: libc.unshare(0x10000000),\n"
        "         'ptrace': lambda: libc.ptrace(0, 0, 0, 0),\n"
        "         'keyctl': lambda: libc.syscall(250, 0, 0, 0, 0),\n"
        "         'bpf': lambda: libc.syscall(321, 0, 0, 0),\n"
        "         'clone(NEWNET)': lambda: libc.syscall(56, 0x40000000 | 17, 0, 0, 0, 0),\n"
        "         'clone3': lambda: libc.syscall(435, 0, 0),\n"
        "         'x32 getpid': lambda: libc.syscall(0x40000000 | 39)}\n"
        "for name, call in calls.items():\n"
        "    out[name] = [call(), errno.errorcode.get(ctypes.get_errno())]\n"
        "import multiprocessing, subprocess, threading\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "out['subprocess'] = subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout\n"
        "with multiprocessing.Pool(2) as pool:\n    out['pool'] = pool.map(abs, [-1, -2])\n"
        "print(json.dumps(out))"
    )
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the probe uses x86_64 system call numbers")
    assert sb.syscall_filter.startswith("seccomp:")
    result = sb.run(code, timeout=60)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "thread"
    seen = json.loads(lines[-1])
    assert seen.pop("clone3") == [-1, "ENOSYS"]  # the C library falls back to clone
    assert seen.pop("subprocess") == "child\n" and seen.pop("pool") == [1, 2]
    assert seen == {name: [-1, "EPERM"] for name in seen}, seen
    assert_alive(sb)


def test_killing_the_parent_and_everything_fails(sb: LocalSandbox) -> None:
    canaries = [subprocess.Popen(["sleep", "60"])]
    if os.geteuid() == 0:
        canaries.append(subprocess.Popen(["sleep", "60"], user=65534, group=65534, extra_groups=[]))
    try:
        code = (
            "import os, signal\nout = [os.getppid()]\n"
            "for target in (os.getppid(), -1):\n"
            "    try:\n        os.kill(target, signal.SIGKILL); out.append('sent')\n"
            "    except OSError as exc:\n        out.append(type(exc).__name__)\n"
            "print(out)"
        )
        result = sb.run(code)
        if sb.isolation == "bwrap" and not sb.fork_server:
            # the parent is the supervisor as pid 1 of the sandbox's pid namespace (bwrap --as-pid-1):
            # the kernel ignores signals sent to it from inside; nothing else is in reach
            assert result.ok and result.stdout == "[1, 'sent', 'ProcessLookupError']\n", result
        else:
            # the parent is the sandbox's own supervisor: killing it ends the worker (its kernel dies
            # with it), like os._exit; a failed call, and the next one runs in a fresh worker
            assert not result.ok and result.state_lost and "SIGKILL" in (result.error or ""), result
        assert all(c.poll() is None for c in canaries)  # host processes, root's and uid 65534's
        assert_alive(sb)
        suicide = sb.run("import os, signal\nos.kill(0, signal.SIGKILL)")
        assert not suicide.ok and suicide.state_lost and "SIGKILL" in (suicide.error or "")
        assert_alive(sb)
        assert all(c.poll() is None for c in canaries)
    finally:
        for canary in canaries:
            canary.kill()
            canary.wait()


def test_huge_stdout_is_capped(sb: LocalSandbox) -> None:
    code = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.write(chunk)"
    result = sb.run(code, timeout=60)
    assert result.ok, result.stderr
    assert len(result.stdout) < 20_100 and "more characters cut]" in result.stdout
    assert_alive(sb)


def test_disk_fill_is_stopped(sb: LocalSandbox) -> None:
    code = (
        "import os\nwritten = 0\nchunk = b'x' * (1 << 20)\n"
        "try:\n    with open('fill.bin', 'wb') as f:\n"
        "        while written < 600 << 20:\n            f.write(chunk)\n            f.flush()\n"
        "            written += len(chunk)\n"
        "except OSError as exc:\n    print('stopped', written >> 20, exc.strerror)\n"
    )
    result = sb.run(code, timeout=60)
    assert result.ok, result.stderr
    assert result.stdout.startswith("stopped") and "File too large" in result.stdout, result.stdout
    assert (sb.workdir / "fill.bin").stat().st_size <= 512 << 20
    tmp = sb.run("written = 0\ntry:\n    with open('/tmp/fill.bin', 'wb') as f:\n"
                 "        while written < 600 << 20:\n            f.write(b'x' * (1 << 20))\n"
                 "            f.flush()\n            written += 1 << 20\n"
                 "except OSError as exc:\n    print('stopped', written >> 20, exc.strerror)",
                 timeout=60)
    assert tmp.ok and "No space left on device" in tmp.stdout, (tmp.stdout, tmp.stderr)
    assert int(tmp.stdout.split()[1]) <= 256
    assert sb.run("import os\nos.remove('fill.bin')\nos.remove('/tmp/fill.bin')").ok
    assert_alive(sb)


@pytest.mark.slow
def test_many_files_under_the_file_cap_cannot_fill_the_disk(level: str, tmp_path: Path) -> None:
    """The working-directory quota stops what the per-file rlimit cannot: many medium files."""
    quota = 200 << 20
    with LocalSandbox(tmp_path / "work", isolation=level,
                      limits=Limits(workdir_bytes=quota)) as sb:
        sb.put_file("image_1.png", b"task image")
        assert sb.run("keep = 1\nopen('notes.txt', 'w').write('earlier result')").ok
        code = ("import os\nos.makedirs('d/e', exist_ok=True)\nchunk = os.urandom(1 << 20)\n"
                "for i in range(1000):\n"
                "    with open(f'd/e/fill_{i}.bin', 'wb') as f:\n"
                "        for _ in range(32):\n            f.write(chunk)\n")
        result = sb.run(code, timeout=60)
        assert not result.ok and result.state_lost
        assert result.error is not None and "quota of 200 MiB" in result.error, result.error
        assert sorted(sb.list_files()) == ["image_1.png", "notes.txt"]
        assert not (sb.workdir / "d").exists()
        assert sb.get_file("image_1.png") == b"task image"
        assert_alive(sb)
        written = sb.run("import os\nopen('ok.bin', 'wb').write(os.urandom(50 << 20))")
        assert written.ok and written.new_files == ["ok.bin"], written.error


def test_host_file_access_never_follows_planted_links(sb: LocalSandbox, tmp_path: Path) -> None:
    target = tmp_path / "host-target.txt"
    target.write_text("host data")
    code = (
        f"import os\nos.symlink({str(target)!r}, 'image_1.png')\nos.mkfifo('fifo.png')\n"
        f"os.mkdir('d')\nos.symlink({str(tmp_path)!r}, 'd/up')"
    )
    assert sb.run(code).ok, "planting links"
    for name in ("image_1.png", "d/up/host-target.txt"):
        with pytest.raises(ValueError, match="symlink"):
            sb.put_file(name, b"PNG bytes")
        with pytest.raises(ValueError, match="symlink"):
            sb.get_file(name)
    with pytest.raises(ValueError, match="regular file"):
        sb.get_file("fifo.png")  # would block forever with a plain open()
    assert target.read_text() == "host data"
    assert_alive(sb)

