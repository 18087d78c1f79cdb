"""LocalSandbox against real worker processes (no mocks)."""

from __future__ import annotations

import os
import site
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vtb_agents.sandbox import (
    OUTPUT_CAP_CHARS,
    ExecResult,
    Limits,
    LocalSandbox,
    Sandbox,
    open_sandbox,
    worker_command,
)
from vtb_agents.sandbox.output import CappedText

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sb(tmp_path: Path) -> Iterator[LocalSandbox]:
    with open_sandbox("local", workdir=tmp_path / "work") as sandbox:
        assert isinstance(sandbox, LocalSandbox)
        yield sandbox


def test_protocol_and_isolation_attribute(sb: LocalSandbox) -> None:
    assert isinstance(sb, Sandbox)
    assert sb.isolation in ("bwrap", "fallback", "process")  # "auto": the best level that works
    assert sb.workdir.is_dir()
    command = worker_command("/usr/bin/python3", 5, 6, Limits())
    assert command[:2] == ["/usr/bin/python3", "-I"]


def test_state_persists_across_calls(sb: LocalSandbox) -> None:
    assert sb.run("import math\nx = 41").ok
    result = sb.run("print(math.floor(x + 1.5))")
    assert result.ok and result.stdout == "42\n"
    assert result.error is None and not result.state_lost
    assert isinstance(result, ExecResult)


def test_last_expression_is_shown(sb: LocalSandbox) -> None:
    assert sb.run("y = 3\ny * 2").stdout == "6\n"
    assert sb.run("None").stdout == ""


def test_stdout_and_stderr_capture_all_paths(sb: LocalSandbox) -> None:
    code = (
        "import os, sys, ctypes\n"
        "print('py')\n"
        "os.write(1, b'raw1\\n')\n"
        "os.write(2, b'raw2\\n')\n"
        "sys.stderr.write('err\\n')\n"
        "ctypes.CDLL(None).printf(b'from-c\\n')\n"
        "os.system('echo from-child')\n"
    )
    result = sb.run(code)
    assert result.ok, result.stderr
    for piece in ("py\n", "raw1\n", "from-c\n", "from-child\n"):
        assert piece in result.stdout
    assert "raw2\n" in result.stderr and "err\n" in result.stderr
    assert "raw2" not in result.stdout


def test_user_code_cannot_corrupt_the_protocol(sb: LocalSandbox) -> None:
    fake = "import os, struct, json\nb = json.dumps({'id': 99, 'ok': True}).encode()\n"
    fake += "os.write(1, struct.pack('>I', len(b)) + b)\n"
    assert sb.run(fake + "z = 1").ok
    replaced = sb.run("import sys, io\nsys.stdout = io.StringIO()\nprint('hidden')\nz += 1")
    assert replaced.ok
    closed = sb.run("import sys\nsys.stdout.close()\nsys.stderr.close()\nz += 1")
    assert closed.ok
    fds = sb.run("import os\nos.close(1)\nos.close(2)\nz += 1")
    assert fds.ok
    after = sb.run("print('z =', z)")
    assert after.ok and after.stdout == "z = 4\n"


def test_exception_reports_error_and_traceback(sb: LocalSandbox) -> None:
    result = sb.run("def f():\n    return 1 / 0\nf()")
    assert not result.ok
    assert result.error == "ZeroDivisionError: division by zero"
    assert "Traceback" in result.stderr and "return 1 / 0" in result.stderr
    assert "worker.py" not in result.stderr
    assert not result.state_lost
    assert sb.run("f").ok


def test_syntax_error(sb: LocalSandbox) -> None:
    result = sb.run("def (:")
    assert not result.ok and result.error is not None and result.error.startswith("SyntaxError")


def test_timeout_resets_state_and_next_call_works(sb: LocalSandbox) -> None:
    assert sb.run("kept = 1").ok
    result = sb.run("print('started')\nwhile True: pass", timeout=1)
    assert not result.ok and result.state_lost
    assert result.error == (
        "timeout after 1 s; the Python state was reset (variables and imports lost)")
    assert "started" in result.stdout
    after = sb.run("print('kept' in globals())")
    assert after.ok and after.stdout == "False\n" and not after.state_lost


def test_worker_death_is_reported_and_worker_restarts(sb: LocalSandbox) -> None:
    assert sb.run("v = 1").ok
    result = sb.run("import os\nos._exit(3)")
    assert not result.ok and result.state_lost
    assert result.error is not None and "exited with code 3" in result.error
    assert "state was reset" in result.error
    after = sb.run("print('v' in globals())")
    assert after.ok and after.stdout == "False\n"


def test_sys_exit_is_an_exception_and_worker_survives(sb: LocalSandbox) -> None:
    assert sb.run("w = 7").ok
    result = sb.run("import sys\nsys.exit(0)")
    assert not result.ok and not result.state_lost
    assert result.error == "SystemExit: 0"
    after = sb.run("print(w)")
    assert after.ok and after.stdout == "7\n"


def test_huge_output_is_capped(sb: LocalSandbox) -> None:
    result = sb.run("print('a' * 50_000_000)\nimport sys\n_ = sys.stderr.write('b' * 50_000)")
    assert result.ok
    assert len(result.stdout) < OUTPUT_CAP_CHARS + 100
    assert "more characters cut]" in result.stdout
    assert f"[... {50_000_001 - OUTPUT_CAP_CHARS} more characters cut]" in result.stdout
    assert "more characters cut]" in result.stderr and len(result.stderr) < OUTPUT_CAP_CHARS + 100
    after = sb.run("print('small')")
    assert after.ok and after.stdout == "small\n"


def test_capped_text_keeps_head_and_tail() -> None:
    capped = CappedText(10)
    data = "é" * 7 + "x" * 20 + "END"
    raw = data.encode()
    for i in range(0, len(raw), 3):  # splits the two-byte characters
        capped.feed(raw[i:i + 3])
    assert capped.text() == "ééééé\n[... 20 more characters cut]\nxxEND"
    small = CappedText(10)
    small.feed("héllo".encode())
    assert small.text() == "héllo"


def test_new_files_lists_created_and_modified_files(sb: LocalSandbox) -> None:
    sb.put_file("image_0.png", b"old")
    sb.put_file("untouched.txt", b"same")
    code = (
        "from PIL import Image\n"
        "Image.new('RGB', (8, 8), 'red').save('transformed_image_0.png')\n"
        "open('image_0.png', 'wb').write(b'modified')\n"
        "import os\nos.makedirs('sub', exist_ok=True)\n"
        "open('sub/note.txt', 'w').write('hi')\n"
    )
    result = sb.run(code)
    assert result.ok, result.stderr
    assert result.new_files == ["image_0.png", "sub/note.txt", "transformed_image_0.png"]
    assert sb.get_file("transformed_image_0.png").startswith(b"\x89PNG")
    assert sb.run("x = 1").new_files == []
    assert sb.list_files() == ["image_0.png", "sub/note.txt", "transformed_image_0.png",
                               "untouched.txt"]


def test_environment_is_scrubbed(sb: LocalSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTB_TEST_SECRET", "s3cret")
    with open_sandbox() as fresh:  # started after the variable was set
        code = (
            "import os\n"
            "print('VTB_TEST_SECRET' in os.environ)\n"
            "print(b's3cret' in open('/proc/self/environ', 'rb').read())\n"
            "print(os.environ['HOME'] == os.getcwd())\n"
        )
        result = fresh.run(code)
        assert result.ok, result.stderr
        assert result.stdout == "False\nFalse\nTrue\n"


def test_scientific_libraries_import_in_isolated_mode(sb: LocalSandbox) -> None:
    result = sb.run("import numpy, PIL.Image, cv2, pandas, scipy.ndimage\nprint('ok')", timeout=60)
    assert result.ok and result.stdout == "ok\n", result.stderr


def test_worker_skips_site_but_has_its_packages_and_builtins(sb: LocalSandbox) -> None:
    """The worker starts with ``-S`` (no ``.pth`` files run) and sets up what ``site`` would have:
    the packages, a venv's prefix and the builtins ``exit``/``quit``/``help``."""
    assert worker_command("/usr/bin/python3", 5, 6, Limits(), setup={"site": {}})[:4] == [
        "/usr/bin/python3", "-I", "-S", "-B"]
    code = ("import sys, numpy\n"
            "print(sys.flags.no_site, sys.prefix, sys.exec_prefix)\n"
            "print([p for p in sys.path if p.endswith('-packages')])\n"
            "print([type(f).__name__ for f in (exit, quit, help, copyright)])\n"
            "print([getattr(f, '__name__', type(f).__name__) for f in sys.meta_path])\n")
    result = sb.run(code)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"1 {sys.prefix} {sys.exec_prefix}"
    assert lines[1] == str([p for p in site.getsitepackages() if os.path.isdir(p)])
    assert lines[2] == "['Quitter', 'Quitter', '_Helper', '_Printer']"
    # no finder added by a .pth file (an editable install's, setuptools' distutils shim); the worker's
    # own image-region tracking (region_tracker.py) waits for PIL.Image in front, unless the fork
    # server imported it already (then the tracker patched it at once)
    tracker = [] if sb.fork_server else ["RegionFinder"]
    assert lines[3] == str([*tracker, "BuiltinImporter", "FrozenImporter", "PathFinder"])
    result = sb.run("exit(3)")
    assert not result.ok and result.error == "SystemExit: 3" and not result.state_lost


def test_site_is_skipped_only_for_this_interpreter_as_started(tmp_path: Path) -> None:
    """Another path to the same binary may find another prefix (a venv's python is a link to its
    base interpreter): such a worker runs ``site`` itself."""
    from vtb_agents.sandbox.local import site_setup

    link = tmp_path / "python3"
    link.symlink_to(sys.executable)
    assert site_setup(sys.executable) == {"path": [p for p in site.getsitepackages() if os.path.isdir(p)],
                                          "prefix": sys.prefix, "exec_prefix": sys.exec_prefix}
    assert site_setup(str(link)) is None


def test_put_get_round_trip_and_escapes(sb: LocalSandbox, tmp_path: Path) -> None:
    data = bytes(range(256)) * 10
    sb.put_file("dir/blob.bin", data)
    assert sb.get_file("dir/blob.bin") == data
    assert sb.run("print(len(open('dir/blob.bin', 'rb').read()))").stdout == "2560\n"
    for bad in ("/etc/passwd", "../outside", "dir/../../outside", ""):
        with pytest.raises(ValueError):
            sb.put_file(bad, b"x")
        with pytest.raises(ValueError):
            sb.get_file(bad)
    (tmp_path / "secret.txt").write_bytes(b"no")
    (sb.workdir / "link").symlink_to(tmp_path)
    with pytest.raises(ValueError):
        sb.get_file("link/secret.txt")


def test_close_is_idempotent_and_removes_temp_workdir() -> None:
    sandbox = LocalSandbox()
    workdir = sandbox.workdir
    assert workdir.is_dir() and sandbox.run("print(1)").ok
    sandbox.close()
    sandbox.close()
    assert not workdir.exists()
    with pytest.raises(RuntimeError):
        sandbox.run("print(1)")


def test_worker_starts_at_the_first_run_and_files_need_none(tmp_path: Path) -> None:
    """An episode that only places images and lists files (no code call) costs no process; the
    first run starts the worker with nothing lost, and close stops it."""
    with open_sandbox("local", workdir=tmp_path / "work") as sandbox:
        assert isinstance(sandbox, LocalSandbox)
        sandbox.put_file("image_1.png", b"png")
        assert sandbox.list_files() == ["image_1.png"] and sandbox.get_file("image_1.png") == b"png"
        assert sandbox.worker_pid is None
        result = sandbox.run("print(open('image_1.png').read())")
        assert result.ok and result.stdout.strip() == "png" and not result.state_lost
        pid = sandbox.worker_pid
        assert pid is not None and Path(f"/proc/{pid}").exists()
    assert sandbox.worker_pid is None and not Path(f"/proc/{pid}/cmdline").exists()


def test_a_worker_that_cannot_start_fails_the_first_run(tmp_path: Path) -> None:
    """Start failures surface at the first code call as SandboxError (the tool guard passes it on,
    so the episode ends as an infrastructure failure), not as a silent success."""
    from vtb_agents.sandbox import SandboxError
    with open_sandbox("local", workdir=tmp_path / "work", python=str(tmp_path / "no-python"),
                      isolation="process") as sandbox:
        sandbox.put_file("a.txt", b"x")  # files still work
        with pytest.raises(SandboxError, match="did not start|No such file"):
            sandbox.run("print(1)")


def test_given_workdir_is_created_and_kept(tmp_path: Path) -> None:
    workdir = tmp_path / "a" / "b"
    with open_sandbox(workdir=workdir) as sandbox:
        assert sandbox.run("open('f.txt', 'w').write('x')").ok
    assert (workdir / "f.txt").read_text() == "x"


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="local.*e2b"), open_sandbox("docker"):
        pass


def test_run_is_thread_safe(sb: LocalSandbox) -> None:
    assert sb.run("counter = 0").ok
    results: list[ExecResult] = []

    def work() -> None:
        for _ in range(10):
            results.append(sb.run("c = counter\ncounter = c + 1"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.ok for r in results)
    assert sb.run("print(counter)").stdout == "40\n"


def test_worker_death_between_calls_is_noticed(sb: LocalSandbox) -> None:
    code = "import os, threading, time\nq = 1\n"
    code += "threading.Thread(target=lambda: (time.sleep(0.2), os._exit(5))).start()"
    assert sb.run(code).ok
    time.sleep(0.6)
    result = sb.run("print('q' in globals())")
    assert result.ok and result.state_lost and result.stdout == "False\n"
    assert "exited with code 5" in result.stderr


def test_isolation_option_env_var_and_bad_values(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTB_SANDBOX_ISOLATION", "process")
    with open_sandbox(workdir=tmp_path / "a") as sandbox:
        assert sandbox.isolation == "process"
    with open_sandbox(workdir=tmp_path / "b", isolation="process") as sandbox:
        assert sandbox.isolation == "process"
    with pytest.raises(ValueError, match="isolation must be one of"):
        LocalSandbox(tmp_path / "c", isolation="docker")
    monkeypatch.setenv("VTB_SANDBOX_ISOLATION", "chroot")
    with pytest.raises(ValueError, match="isolation must be one of"):
        LocalSandbox(tmp_path / "d")
    command = worker_command("/usr/bin/python3", 5, 6, Limits(), setup={"level": "fallback"})
    assert command[-1] == '{"level": "fallback"}'


def test_strict_needs_bubblewrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vtb_agents.sandbox import SandboxError, isolation

    monkeypatch.delenv("VTB_SANDBOX_ISOLATION", raising=False)
    with pytest.raises(SandboxError, match="strict sandboxing needs isolation 'bwrap'"):
        LocalSandbox(tmp_path / "a", isolation="fallback", strict=True)
    monkeypatch.setattr(isolation, "_probe_errors", {})  # probe again, without bwrap on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match=r"^bubblewrap \(bwrap\) is not installed or not usable: "
                                           r"bwrap was not found on PATH; install it or drop "
                                           r"--sandbox-strict$"):
        LocalSandbox(tmp_path / "b", strict=True)
    with pytest.raises(SandboxError, match="isolation level 'bwrap' is not available here"):
        LocalSandbox(tmp_path / "c", isolation="bwrap")
    with open_sandbox(workdir=tmp_path / "d") as sandbox:  # "auto" falls back
        assert sandbox.isolation in ("fallback", "process")
        assert sandbox.run("print('ok')").stdout == "ok\n"


def test_auto_prefers_bubblewrap_and_strict_accepts_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from vtb_agents.sandbox import SandboxError
    from vtb_agents.sandbox.local import choose_level

    monkeypatch.delenv("VTB_SANDBOX_ISOLATION", raising=False)
    try:
        choose_level("bwrap", strict=True, python=sys.executable)
    except SandboxError as exc:
        pytest.skip(f"bubblewrap not usable here: {exc}")
    with open_sandbox(workdir=tmp_path / "w", strict=True) as sandbox:
        assert sandbox.isolation == "bwrap"
        result = sandbox.run("import os\nprint(os.getcwd(), os.environ['HOME'])")
        assert result.stdout == "/sandbox /sandbox\n"


def test_kept_workdir_is_given_back_to_the_host_user(tmp_path: Path) -> None:
    workdir = tmp_path / "kept"
    with open_sandbox(workdir=workdir) as sandbox:
        sandbox.put_file("in/image_0.png", b"x")
        result = sandbox.run("import os\nos.makedirs('out')\nopen('out/r.txt', 'w').write('r')\n"
                             "open('in/image_0.png', 'ab').write(b'y')")
        assert result.ok, result.stderr
    owners = {(p.lstat().st_uid, p.lstat().st_gid) for p in [workdir, *workdir.rglob("*")]}
    assert owners == {(os.getuid(), os.getgid())}
    assert (workdir / "in" / "image_0.png").read_bytes() == b"xy"
