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
import importlib
import io
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from support.together import together

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


def make_venv(folder: Path, packages: tuple[str, ...] | None) -> Path:
    """A venv in ``folder`` (its base interpreter elsewhere) holding ``packages`` of this
    interpreter with their wheels' bundled libraries (``*.libs``), or, with None, everything in
    this interpreter's site-packages; hard-linked where the file system allows (else copied): their
    files have paths under ``folder`` only. Its python."""
    venv = folder / "v env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                                 check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    if packages is None:
        shutil.copytree(site.getsitepackages()[0], target, symlinks=True, dirs_exist_ok=True,
                        copy_function=link_or_copy)
    for name in packages or ():
        source = Path(importlib.import_module(name).__file__ or "").parent
        for tree in [source, *source.parent.glob(f"{'pillow' if name == 'PIL' else name}.libs")]:
            shutil.copytree(tree, target / tree.name, copy_function=link_or_copy)
    return venv / "bin" / "python"


def link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system (/dev/shm)
        shutil.copy2(source, destination)


@pytest.fixture(scope="module", params=PLACES)
def venv_python(request: pytest.FixtureRequest) -> Iterator[Path]:
    """The python of a venv built under ``request.param`` (skipped where that is not writable)."""
    place = request.param
    if not os.path.isdir(place) or not os.access(place, os.W_OK):
        pytest.skip(f"{place} is not a writable folder here")
    folder = Path(tempfile.mkdtemp(prefix="vtb location ", dir=place))
    try:
        (folder / "secret.txt").write_text("the host's")
        yield make_venv(folder, ("PIL",))
    finally:
        forkserver.close_all()  # its zygote holds the venv
        shutil.rmtree(folder)


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.slow
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


def run_sample_suite(python: str, out: Path) -> dict[str, Any]:
    """``vtb run`` of the bundled suite (replay model, rule judge) with ``python``: its summary."""
    done = subprocess.run([python, "-m", "vtb_agents", "run", "--tasks", "sample", "--model", "replay",
                           "--judge", "rule", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_bundled_suite_from_a_venv_under_tmp_scores_as_from_anywhere(tmp_path: Path) -> None:
    """Through the real CLI: ``vtb`` run by a venv in /tmp holding this interpreter's packages
    (hard links: their paths are under /tmp), against the same run from this interpreter. Every
    image call succeeds and the region metric measures the same turns (the reference trajectories'
    crops run in the sandbox too); before, image calls failed there."""
    folder = Path(tempfile.mkdtemp(prefix="vtb venv ", dir="/tmp"))
    try:  # side by side: the run from here needs nothing of the venv (it runs while the venv is built)
        moved, here = together(lambda: run_sample_suite(str(make_venv(folder, None)), tmp_path / "tmp-venv"),
                               lambda: run_sample_suite(sys.executable, tmp_path / "here"))
    finally:
        shutil.rmtree(folder)
    assert moved["tool_metrics"]["success_rate"] == here["tool_metrics"]["success_rate"] == 1.0
    assert moved["tool_metrics"]["calls"] == here["tool_metrics"]["calls"]
    assert here["region_iou"]["turns"] > 0
    turns = {k: v["turns"] for k, v in here["region_iou"]["by_category"].items()}
    assert moved["region_iou"]["turns"] == here["region_iou"]["turns"]
    assert {k: v["turns"] for k, v in moved["region_iou"]["by_category"].items()} == turns


def test_python_roots_follow_a_venv_to_its_base_through_symlinks(tmp_path: Path) -> None:
    """A ``--copies`` venv (its python a file of its own) whose ``home`` is a folder of symlinks
    to the real install, all in folders with spaces: the venv and the real install are roots."""
    base = tmp_path / "real base"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_bytes(b"")
    links = tmp_path / "link prefix" / "bin"
    links.mkdir(parents=True)
    (links / "python").symlink_to(base / "bin" / "python3.11")
    venv = tmp_path / "a venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_bytes(b"")
    (venv / "pyvenv.cfg").write_text(f"home = {links}\ninclude-system-site-packages = false\n")
    roots = python_roots(str(venv / "bin" / "python"))
    assert str(venv) in roots and str(base) in roots, roots
