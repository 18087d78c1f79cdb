"""E2BSandbox against a local stand-in of the E2B SDK. The live E2B service was NOT exercised here.

``FakeSandbox`` plays the remote service: it runs code for real in a persistent namespace (exec in
a dict, in a thread for timeouts) and keeps files in a temp folder, returning the installed SDK's
own model classes. Every call the adapter makes to it is bound against the real SDK's signature
(``test_calls_match_the_real_sdk``), so the stand-in cannot drift from the SDK.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import io
import os
import sys
import threading
import traceback
import typing
from collections.abc import Callable, Iterator
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import pytest
from e2b import ApiParams, EntryInfo, FileType, SandboxNotRunningException, WriteInfo
from e2b_code_interpreter import Context, Execution, ExecutionError, Logs, Result
from e2b_code_interpreter import Sandbox as RealSandbox
from e2b_code_interpreter.exceptions import format_execution_timeout_error
from PIL import Image
from test_task_files import one_error_line, vtb

from vtb_agents.sandbox import Sandbox, SandboxError, open_sandbox
from vtb_agents.sandbox.base import sandbox_settings
from vtb_agents.sandbox.e2b import E2BSandbox

pytestmark = pytest.mark.timeout(60)
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []


def recorded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Log each call as (qualified name, args, kwargs) for the signature check."""
    @functools.wraps(fn)
    def wrapper(owner: Any, *args: Any, **kwargs: Any) -> Any:
        CALLS.append((fn.__qualname__, args, kwargs))
        return fn(owner, *args, **kwargs)
    return wrapper


def _exec_cell(code: str, namespace: dict[str, Any]) -> list[Result]:
    """Run ``code`` like IPython: a final bare expression becomes the main result."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is None:
        return []
    value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    return [] if value is None else [Result(text=repr(value), is_main_result=True)]


class FakeFiles:
    """``sandbox.files``: remote paths are real paths under the test's temp folder."""

    @recorded
    def write(self, path: str, data: Any, user: str | None = None,
              request_timeout: float | None = None, gzip: bool = False,
              use_octet_stream: bool | None = None, metadata: Any = None) -> WriteInfo:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data if isinstance(data, bytes) else data.encode())
        return WriteInfo(name=Path(path).name, type=FileType.FILE, path=path)

    @recorded
    def read(self, path: str, format: str = "text", user: str | None = None,
             request_timeout: float | None = None, gzip: bool = False,
             stream_idle_timeout: float | None = None) -> Any:
        return bytearray(Path(path).read_bytes()) if format == "bytes" else Path(path).read_text()

    @recorded
    def list(self, path: str, depth: int | None = 1, user: str | None = None,
             request_timeout: float | None = None) -> list[EntryInfo]:
        base = Path(path)
        return [EntryInfo(name=p.name, type=FileType.FILE if p.is_file() else FileType.DIR,
                          path=str(p), size=(st := p.stat()).st_size, mode=st.st_mode,
                          permissions="", owner="user", group="user",
                          modified_time=datetime.fromtimestamp(st.st_mtime, UTC))
                for p in base.rglob("*") if len(p.relative_to(base).parts) <= (depth or 99)]

    @recorded
    def make_dir(self, path: str, user: str | None = None,
                 request_timeout: float | None = None) -> bool:
        Path(path).mkdir(parents=True, exist_ok=True)
        return True


class FakeSandbox:
    """Stand-in for ``e2b_code_interpreter.Sandbox`` (same method and parameter names)."""

    instances: typing.ClassVar[list[FakeSandbox]] = []

    def __init__(self) -> None:
        self.files, self.killed, self.namespace = FakeFiles(), 0, {}
        self.cwd, self.thread = "/", threading.Thread()

    @classmethod
    @recorded
    def create(cls, template: str | None = None, timeout: int | None = None,
               metadata: Any = None, envs: Any = None, secure: Any = None,
               allow_internet_access: Any = None, mcp: Any = None, network: Any = None,
               iam: Any = None, lifecycle: Any = None, volume_mounts: Any = None,
               logger: Any = None, idempotency_key: Any = None, **opts: Any) -> FakeSandbox:
        cls.instances.append(sandbox := cls())
        return sandbox

    @recorded
    def create_code_context(self, cwd: str | None = None, language: str | None = None,
                            request_timeout: float | None = None) -> Context:
        self.cwd = cwd or "/"
        return Context(context_id="ctx-1", language=language or "python", cwd=self.cwd)

    @recorded
    def restart_code_context(self, context: Context | str) -> None:
        self.thread.join()  # a kernel restart ends the runaway cell
        self.namespace = {}

    @recorded
    def run_code(self, code: str, language: str | None = None, context: Context | None = None,
                 on_stdout: Any = None, on_stderr: Any = None, on_result: Any = None,
                 on_error: Any = None, envs: Any = None, timeout: float | None = None,
                 request_timeout: float | None = None) -> Execution:
        box: dict[str, Any] = {}

        def cell() -> None:
            out, err, home = io.StringIO(), io.StringIO(), os.getcwd()
            os.chdir(self.cwd)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    box["results"] = _exec_cell(code, self.namespace)
            except Exception as exc:
                box["error"] = ExecutionError(type(exc).__name__, str(exc),
                                              f"\x1b[0;31m{traceback.format_exc()}\x1b[0m")
            finally:
                self.cwd = os.getcwd()
                os.chdir(home)
            box["logs"] = Logs(stdout=[out.getvalue()], stderr=[err.getvalue()])

        self.thread = threading.Thread(target=cell, daemon=True)
        self.thread.start()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise format_execution_timeout_error()  # the SDK's own exception
        return Execution(results=box.get("results"), logs=box["logs"], error=box.get("error"))

    @recorded
    def kill(self, **opts: Any) -> bool:
        self.killed += 1
        return True


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return tmp_path / "remote" / "work"


@pytest.fixture
def sb(tmp_path: Path, remote: Path) -> Iterator[E2BSandbox]:
    with E2BSandbox(tmp_path / "cache", api_key="k", remote_dir=str(remote),
                    sdk=FakeSandbox) as sandbox:
        yield sandbox


def png_bytes() -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((64, 48), 80).convert("RGB").save(buf, "PNG")
    return buf.getvalue()


def test_protocol_state_and_output(sb: E2BSandbox) -> None:
    assert isinstance(sb, Sandbox) and sb.isolation == "e2b" and sb.workdir.is_dir()
    assert sb.run("x = 41").ok
    result = sb.run("import sys\nprint('out')\nsys.stderr.write('err\\n')\nx + 1")
    assert (result.ok, result.stdout, result.stderr, result.error) == (True, "out\n42\n", "err\n", None)


def test_error_mapping_strips_ansi(sb: E2BSandbox) -> None:
    result = sb.run("1 / 0")
    assert not result.ok and result.error == "ZeroDivisionError: division by zero"
    assert "ZeroDivisionError" in result.stderr and "\x1b" not in result.stderr


def test_timeout_restarts_the_context(sb: E2BSandbox) -> None:
    sb.run("x = 1")
    result = sb.run("import time\ntime.sleep(1.0)", timeout=0.2)
    assert not result.ok and result.state_lost
    assert result.error == "timeout after 0.2 s; the Python state was reset (variables and imports lost)"
    assert sb.run("x").error == "NameError: name 'x' is not defined"


def test_sandbox_gone_is_an_error_result(sb: E2BSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(*args: Any, **kwargs: Any) -> Execution:
        raise SandboxNotRunningException("sandbox was killed")
    monkeypatch.setattr(sb._sbx, "run_code", gone)
    result = sb.run("1")
    assert not result.ok and result.state_lost and "SandboxNotRunningException" in (result.error or "")


def test_cwd_contract_survives_chdir(sb: E2BSandbox, remote: Path) -> None:
    sb.run("import os\nos.chdir('/')")
    assert sb.run("print(os.getcwd())").stdout == f"{remote}\n"


def test_png_round_trip_and_new_files(sb: E2BSandbox, remote: Path) -> None:
    data = png_bytes()
    sb.put_file("image_0.png", data)
    assert sb.get_file("image_0.png") == data == (remote / "image_0.png").read_bytes()
    assert (sb.workdir / "image_0.png").read_bytes() == data  # the local cache
    result = sb.run("from PIL import Image\nImage.open('image_0.png').rotate(90)"
                    ".save('transformed_image_0.png')\nopen('sub.txt', 'w').write('a')")
    assert result.ok and result.new_files == ["sub.txt", "transformed_image_0.png"]
    assert sb.run("y = 2").new_files == []
    assert sb.list_files() == ["image_0.png", "sub.txt", "transformed_image_0.png"]
    with pytest.raises(FileNotFoundError):
        sb.get_file("missing.png")


def test_the_listing_is_reused_until_a_put(sb: E2BSandbox) -> None:
    """``list_files`` runs before every model call: against E2B each listing is a round trip, so
    the one taken after a call is reused, and a put invalidates it for the next call's "before"."""
    def listings() -> int:
        return sum(1 for name, _, _ in CALLS if name == "FakeFiles.list")

    sb.put_file("image_0.png", png_bytes())
    start = listings()
    assert sb.list_files() == sb.list_files() == ["image_0.png"] and listings() == start + 1
    result = sb.run("open('a.txt', 'w').write('x')")  # "before" is the listing just taken
    assert result.new_files == ["a.txt"] and listings() == start + 2
    assert sb.list_files() == ["a.txt", "image_0.png"] and listings() == start + 2
    sb.put_file("sub/b.png", png_bytes())
    assert sb.list_files() == ["a.txt", "image_0.png", "sub/b.png"] and listings() == start + 2
    result = sb.run("y = 1")  # listed afresh before it: the file put is not new
    assert result.new_files == [] and listings() == start + 4
    result = sb.run("import os\nos.remove('a.txt')")
    assert result.ok and sb.list_files() == ["image_0.png", "sub/b.png"] and listings() == start + 5


@pytest.mark.parametrize("name", ["../x.png", "/etc/passwd", "a/../../b", ""])
def test_path_escape_rejected(sb: E2BSandbox, name: str) -> None:
    with pytest.raises(ValueError):
        sb.put_file(name, b"x")
    with pytest.raises(ValueError):
        sb.get_file(name)


def test_missing_key_and_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(SandboxError, match="E2B_API_KEY is not set: export it or pass --sandbox local"):
        E2BSandbox(sdk=FakeSandbox)
    monkeypatch.setitem(sys.modules, "e2b_code_interpreter", None)
    with pytest.raises(SandboxError, match=r"pip install 'vtb-agents\[e2b\]'"):
        E2BSandbox(api_key="k")


def test_close_is_idempotent(remote: Path) -> None:
    sandbox = E2BSandbox(api_key="k", remote_dir=str(remote), sdk=FakeSandbox)
    sandbox.close()
    sandbox.close()
    assert FakeSandbox.instances[-1].killed == 1 and not sandbox.workdir.exists()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.run("1")


def test_calls_match_the_real_sdk(remote: Path) -> None:
    """Each call the adapter made binds to the real SDK; the stand-in adds no parameter."""
    CALLS.clear()
    with E2BSandbox(api_key="k", remote_dir=str(remote), sdk=FakeSandbox) as sandbox:
        sandbox.run("print(1)")
        sandbox.run("import time\ntime.sleep(0.5)", timeout=0.1)
        sandbox.put_file("a.bin", b"\x00\xff")
        sandbox.get_file("a.bin")
        sandbox.list_files()
    real_fs = typing.get_type_hints(RealSandbox.files.fget)["return"]
    real = {"FakeSandbox": RealSandbox, "FakeFiles": real_fs}
    seen = set()
    for qualname, args, kwargs in CALLS:
        owner, method = qualname.split(".")
        real_fn, fake_fn = getattr(real[owner], method), getattr(globals()[owner], method)
        seen.add(qualname)
        if method == "create":  # a classmethod; api_key travels in **opts (ApiParams)
            inspect.signature(real_fn).bind(*args, **kwargs)
            assert "api_key" in kwargs and "api_key" in ApiParams.__annotations__
        else:
            inspect.signature(real_fn).bind(object(), *args, **kwargs)
        fake_names = set(inspect.signature(fake_fn).parameters) - {"self", "cls"}
        assert fake_names <= set(inspect.signature(real_fn).parameters), qualname
    assert seen == {"FakeSandbox.create", "FakeSandbox.create_code_context", "FakeSandbox.run_code",
                    "FakeSandbox.restart_code_context", "FakeSandbox.kill", "FakeFiles.make_dir",
                    "FakeFiles.write", "FakeFiles.read", "FakeFiles.list"}


def test_the_vm_has_no_internet_unless_asked_and_the_episode_records_it(remote: Path) -> None:
    CALLS.clear()
    with E2BSandbox(api_key="k", remote_dir=str(remote), sdk=FakeSandbox) as sandbox:
        assert sandbox_settings(sandbox)["sandbox_network"] == "none"
    with E2BSandbox(api_key="k", remote_dir=str(remote), sdk=FakeSandbox, network=True) as sandbox:
        assert sandbox_settings(sandbox)["sandbox_network"] == "internet"
    creates = [kwargs for qualname, _, kwargs in CALLS if qualname == "FakeSandbox.create"]
    assert [c["allow_internet_access"] for c in creates] == [False, True]


def test_sandbox_network_needs_the_e2b_sandbox() -> None:
    with (pytest.raises(ValueError, match="local sandbox never has network access"),
          open_sandbox("local", network=True)):
        pass
    result = vtb("run", "--sandbox-network", "--out", "unused")
    assert result.returncode == 2 and "--sandbox-network needs --sandbox e2b" in one_error_line(result)
