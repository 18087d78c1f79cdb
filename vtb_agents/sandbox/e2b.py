"""``E2BSandbox``: model-written code runs in a remote E2B code-interpreter sandbox.

Isolation level ``"e2b"``: a Firecracker micro-VM on E2B's service, one per episode, with its own
Jupyter kernel (Python state persists across ``run`` calls, as with ``LocalSandbox``).

- The DESIGN.md working directory is the *remote* folder ``remote_dir`` (default
  ``/home/user/work``). The code runs in a dedicated code context there; before every call a tiny
  cell re-creates the folder and ``chdir``s into it, so user code's own ``chdir`` cannot break the
  contract (one extra round trip per call).
- ``put_file``/``get_file``/``list_files`` act on the remote folder, as bytes. ``workdir`` is a
  local cache: a copy of each file put or fetched through this object. It is never the source of
  truth; files the code writes appear there only once fetched with ``get_file``.
- ``new_files`` compares ``files.list`` (name, size, modification time) before and after a call;
  a rewrite keeping both size and microsecond mtime is missed. Only regular files, to depth 10.
  The listing after a call is kept: the next call's "before" and ``list_files`` (asked before
  every model call) reuse it rather than make a round trip each, until ``put_file`` writes (its
  names are added to what ``list_files`` returns at once; the next call lists afresh before
  running). Files a background process of the code writes between calls therefore show in the
  next call's ``new_files`` rather than in ``list_files`` before it.
- A timeout restarts the code context (runaway code stopped, state reset), like ``LocalSandbox``.
- The remote VM is the isolation boundary, so symlinks inside it are not resolved here.

Needs ``e2b-code-interpreter>=2.4`` (``restart_code_context``) and ``E2B_API_KEY``.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S
from vtb_agents.safefs import relative_name

from .base import STATE_RESET, ExecResult, SandboxError
from .leftovers import owned_tempdir
from .output import CappedText

REMOTE_DIR = "/home/user/work"
LIFETIME_S = 3600
"""Life of the remote VM in seconds (E2B kills it after this; 1 hour is the hobby-tier maximum)."""
LIST_DEPTH = 10
_PREP_TIMEOUT_S = 30.0
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_INSTALL = "install the 'e2b' extra: pip install 'vtb-agents[e2b]'"
_NO_KEY = "E2B_API_KEY is not set: export it or pass --sandbox local"


class E2BSandbox:
    """A ``Sandbox`` backed by a remote E2B code interpreter (see the module docstring)."""

    isolation = "e2b"
    network: str
    memory_cap = "the E2B VM's own"
    syscall_filter = "the E2B VM's own"

    def __init__(self, workdir: Path | None = None, *, api_key: str | None = None,
                 template: str | None = None, lifetime_s: int = LIFETIME_S,
                 remote_dir: str = REMOTE_DIR, network: bool = False, sdk: Any = None) -> None:
        """Start the remote sandbox; ``sdk`` is the SDK's ``Sandbox`` class (tests pass a stand-in).

        ``network=False`` (default) starts the VM without internet access, as the local sandbox
        (and the interpreter tool's description) promise; ``True`` allows it (``--sandbox-network``).
        """
        try:
            import e2b
            if sdk is None:
                import e2b_code_interpreter
                sdk = e2b_code_interpreter.Sandbox
        except ImportError as exc:
            raise SandboxError(f"the E2B SDK is not installed: {_INSTALL}") from exc
        self._errors = e2b
        api_key = api_key or os.environ.get("E2B_API_KEY")
        if not api_key:
            raise SandboxError(_NO_KEY)
        self.remote_dir = str(PurePosixPath(remote_dir))
        self._owns_workdir = workdir is None
        root = owned_tempdir("vtb-e2b-") if workdir is None else Path(workdir)
        root.mkdir(parents=True, exist_ok=True)
        self.workdir = root.resolve()
        self._lock, self._closed = threading.Lock(), False
        self.network = "internet" if network else "none"
        self._sbx: Any = None
        self._context: Any = None
        self._listing: dict[str, tuple[int, Any]] | None = None  # the last listing, if nothing was put since
        self._names: set[str] | None = None  # the files as this object knows them, for list_files
        try:
            self._sbx = sdk.create(template=template, timeout=lifetime_s, api_key=api_key,
                                   allow_internet_access=network)
            self._sbx.files.make_dir(self.remote_dir)
            self._context = self._sbx.create_code_context(cwd=self.remote_dir, language="python")
        except Exception as exc:
            self.close()
            raise SandboxError(f"the E2B sandbox did not start ({type(exc).__name__}: {exc})") from exc

    def _prepare(self) -> None:
        """Make sure the kernel's cwd is the working folder (user code may have moved it)."""
        os_call = "__import__('os')"
        self._sbx.run_code(f"{os_call}.makedirs({self.remote_dir!r}, exist_ok=True); "
                           f"{os_call}.chdir({self.remote_dir!r})",
                           context=self._context, timeout=_PREP_TIMEOUT_S)

    def _snapshot(self) -> dict[str, tuple[int, Any]]:
        """``{relative name: (size, modified time)}`` of the regular files in the remote folder
        (listed now, and kept as the last listing)."""
        self._listing = self._names = None  # a failed listing leaves none to reuse
        try:
            entries = self._sbx.files.list(self.remote_dir, depth=LIST_DEPTH)
        except self._errors.FileNotFoundException:
            entries = []
        root = PurePosixPath(self.remote_dir)
        listing = {str(PurePosixPath(e.path).relative_to(root)): (e.size, e.modified_time)
                   for e in entries if e.type == self._errors.FileType.FILE}
        self._listing, self._names = listing, set(listing)
        return listing

    def run(self, code: str, timeout: float = DEFAULT_CODE_TIMEOUT_S) -> ExecResult:
        """Execute ``code`` in the remote kernel (one call at a time)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            out, err = CappedText(), CappedText()
            ok, error, state_lost, before = True, None, False, None
            start = time.monotonic()
            try:
                self._prepare()
                before = self._listing if self._listing is not None else self._snapshot()
                start = time.monotonic()
                execution = self._sbx.run_code(code, context=self._context, timeout=timeout)
            except Exception as exc:
                ok, execution = False, None
                error, state_lost = self._failure(exc, timeout, time.monotonic() - start)
            duration = time.monotonic() - start
            if execution is not None:
                out.add("".join(execution.logs.stdout))
                out.add("".join(f"{r.text}\n" for r in execution.results
                                if r.is_main_result and r.text))
                err.add("".join(execution.logs.stderr))
                if execution.error is not None:
                    ok, error = False, f"{execution.error.name}: {execution.error.value}"
                    err.add(_ANSI.sub("", execution.error.traceback))
            try:
                after = self._snapshot() if before is not None and not self._closed else {}
            except Exception:
                after = {}  # the sandbox is gone: the error above says so (and nothing is kept)
            new_files = sorted(k for k, v in after.items() if (before or {}).get(k) != v)
            return ExecResult(ok=ok, stdout=out.text(), stderr=err.text(), error=error,
                              new_files=new_files, duration_s=duration, state_lost=state_lost)

    def _failure(self, exc: Exception, timeout: float, elapsed: float) -> tuple[str, bool]:
        """(error line, state_lost) for an SDK exception raised by a run.

        A plain ``TimeoutException`` after the time allowed is the execution timeout; one raised
        sooner (e.g. a 502 from a VM that timed out) is a sandbox failure.
        """
        gone = (self._errors.SandboxNotRunningException, self._errors.SandboxNotFoundException)
        if self._closed:
            return "the sandbox was closed during this call", True
        if (isinstance(exc, self._errors.TimeoutException) and elapsed >= 0.95 * timeout
                and not isinstance(exc, (*gone, self._errors.SandboxUnreachableException))):
            try:  # SDK >= 2.4; stops the runaway code, as the local worker is killed
                self._sbx.restart_code_context(self._context)
                return f"timeout after {timeout:g} s; {STATE_RESET}", True
            except Exception as restart_exc:
                return (f"timeout after {timeout:g} s; the kernel could not be restarted "
                        f"({type(restart_exc).__name__}: {restart_exc})"), True
        return (f"the E2B sandbox failed during this call ({type(exc).__name__}: {exc})",
                isinstance(exc, gone))

    def _remote(self, name: str) -> str:
        """Remote path of ``name``; ValueError if it could escape the working folder."""
        return str(PurePosixPath(self.remote_dir, relative_name(name)))

    def _cache(self, name: str, data: bytes) -> None:
        path = self.workdir.joinpath(*relative_name(name).parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def put_file(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` in the remote folder (and the local cache)."""
        remote = self._remote(name)
        self._listing = None  # its size and time are not known here: the next call lists afresh
        self._sbx.files.write(remote, bytes(data))
        self._cache(name, data)
        if self._names is not None:
            self._names.add(str(PurePosixPath(remote).relative_to(self.remote_dir)))

    def get_file(self, name: str) -> bytes:
        """Read ``name`` from the remote folder (and refresh the local cache)."""
        try:
            data = bytes(self._sbx.files.read(self._remote(name), format="bytes"))
        except self._errors.FileNotFoundException as exc:
            raise FileNotFoundError(f"no file {name!r} in the sandbox: {exc}") from exc
        self._cache(name, data)
        return data

    def list_files(self) -> list[str]:
        """Relative names of the regular files in the remote folder, sorted (as of the last call or
        put: see the module docstring)."""
        with self._lock:
            return sorted(self._names if self._names is not None else self._snapshot())

    def close(self) -> None:
        """Kill the remote sandbox and remove an owned local cache; idempotent.

        A failing ``kill`` is ignored: E2B still ends the VM after ``lifetime_s``.
        """
        if self._closed:
            return
        self._closed = True
        if self._sbx is not None:
            try:
                self._sbx.kill()
            except Exception:  # unreachable or already gone: E2B ends it after lifetime_s anyway
                pass
        with self._lock:
            if self._owns_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> E2BSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
