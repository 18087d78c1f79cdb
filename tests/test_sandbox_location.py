"""The sandbox works wherever the interpreter lives: a venv under /tmp, /var/tmp, /dev/shm, the
home folder or /opt, in a folder whose name has a space, through each way a worker starts (forked
by the fork server, started by bwrap, the fallback level).

The sandbox mounts a private /tmp and /dev/shm of its own; an install under them (pip, uv, tox and
CI runners put venvs in /tmp) must be bound back on top, read-only, or every module imported after
the worker started is missing: PIL imports its format plugins on the first ``Image.open``, so an
image call failed with ``UnidentifiedImageError`` while ``import PIL`` worked. Each test builds a
venv there (``python -m venv``, symlinks to the base interpreter) holding a copy of PIL, so the
modules the cell imports lazily are files under that folder, and checks from inside the sandbox
that they load, that the venv's mount is read-only and that nothing else of the host's folder shows.
"""

from __future__ import annotations

import ast
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import PIL
import pytest
from PIL import Image

from vtb_agents.sandbox import LocalSandbox, SandboxError, forkserver
from vtb_agents.sandbox.isolation import python_roots

pytestmark = pytest.mark.timeout(240)
PLACES = ["/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), "/opt"]
WAYS = {"forked": ("bwrap", True), "bwrap": ("bwrap", False), "fallback": ("fallback", None)}

CELL = """
import os, sys
from PIL import Image
image = Image.open('in.png')
image.crop((0, 0, 4, 4)).save('out.jpg')
mounts = {}
for line in open('/proc/self/mountinfo'):
    fields = line.split()
    mounts[fields[4].replace('\\\\040', ' ')] = fields[5].split(',')
print(repr({
    'pil': sys.modules['PIL'].__file__,
    'plugins': sorted(m for m in sys.modules if m in ('PIL.PngImagePlugin', 'PIL.JpegImagePlugin')),
    'size': image.size,
    'options': mounts.get(VENV),
    'folder': sorted(os.listdir(os.path.dirname(VENV))),
    'secret': os.path.exists(SECRET),
}))
"""


def make_venv(folder: Path) -> Path:
    """A venv in ``folder`` (its base interpreter elsewhere) with a copy of this PIL: its python."""
    venv = folder / "v env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                                 check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    source = Path(PIL.__file__).parent
    shutil.copytree(source, target / "PIL")
    for libs in source.parent.glob("[Pp]illow.libs"):  # the wheel's bundled libraries, if any
        shutil.copytree(libs, target / libs.name)
    return venv / "bin" / "python"


@pytest.fixture(scope="module", params=PLACES)
def venv_python(request: pytest.FixtureRequest) -> Iterator[Path]:
    """The python of a venv built under ``request.param`` (skipped where that is not writable)."""
    place = request.param
    if not os.path.isdir(place) or not os.access(place, os.W_OK):
        pytest.skip(f"{place} is not a writable folder here")
    folder = Path(tempfile.mkdtemp(prefix="vtb location ", dir=place))
    try:
        (folder / "secret.txt").write_text("the host's")
        yield make_venv(folder)
    finally:
        forkserver.close_all()  # its zygote holds the venv
        shutil.rmtree(folder)


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("way", WAYS)
def test_lazily_imported_modules_of_a_venv_load_wherever_it_lives(venv_python: Path, way: str, tmp_path: Path) -> None:
    level, fork_server = WAYS[way]
    venv = str(venv_python.parents[1])
    assert venv in python_roots(str(venv_python))
    try:
        sandbox = LocalSandbox(tmp_path / "work", isolation=level, python=str(venv_python), fork_server=fork_server)
    except SandboxError as exc:
        pytest.skip(f"{way} is not available here: {exc}")
    with sandbox:
        assert sandbox.fork_server is bool(fork_server)
        sandbox.put_file("in.png", png())
        result = sandbox.run(f"VENV = {venv!r}\nSECRET = {str(Path(venv).parent / 'secret.txt')!r}\n{CELL}")
        assert result.ok, result.stderr
        seen = ast.literal_eval(result.stdout)
        assert seen["pil"].startswith(venv + "/") and seen["size"] == (8, 8)
        assert seen["plugins"] == ["PIL.JpegImagePlugin", "PIL.PngImagePlugin"]
        assert "out.jpg" in result.new_files
        assert seen["options"] is not None and "ro" in seen["options"], seen  # bound back read-only
        assert seen["folder"] == ["v env"] and not seen["secret"], seen  # the rest stays the host's


def test_a_python_installed_at_tmp_itself_is_refused(tmp_path: Path) -> None:
    """Binding such an install back would show the host's whole /tmp in the sandbox."""
    from vtb_agents.sandbox.isolation import bwrap_args

    with pytest.raises(ValueError, match="contains /tmp"):
        bwrap_args(["/tmp"], {}, str(tmp_path), {}, 1 << 20, 0, None)
