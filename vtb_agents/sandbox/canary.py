"""The canary cell: what the model's code cells need, run once in a fresh sandbox before a run's first task.

The vision tool's description promises PIL (Pillow), NumPy and OpenCV; a sandbox where part of them
cannot be imported fails every image call of every task (a venv the sandbox cannot see, a missing
wheel), and the model, not the harness, would be blamed. Parts of PIL load lazily, at the first
``Image.open`` of a format (``PngImagePlugin``, ``JpegImagePlugin``), so importing the package
proves little: the canary does what code cells do. The host puts a PNG in the working directory
(``put_file``); the cell imports NumPy, PIL and OpenCV, opens the PNG with PIL, crops it, saves the
crop as PNG and JPEG, opens both again, reads the PNG with OpenCV and converts it; the host then
lists the files and reads the JPEG back (``list_files``, ``get_file``) and decodes it itself.

:func:`run_canary` returns the versions the cell found (Python, NumPy, Pillow, OpenCV, inside the
sandbox) or raises :class:`~vtb_agents.sandbox.base.SandboxError` naming the first step that failed
and why (``sandbox 'local': the canary cell failed at "open a PNG with PIL": UnidentifiedImageError:
...``).
"""

from __future__ import annotations

import io
import json

from vtb_agents.sandbox.base import Sandbox, SandboxError

CANARY_TIMEOUT_S = 120.0
"""Time the canary cell gets: its job is to show what works, not to race a loaded machine (its first
call also starts the worker and imports the libraries)."""
IMAGE = "vtb_canary.png"
CROP_PNG, CROP_JPEG = "vtb_canary_crop.png", "vtb_canary_crop.jpg"
SIZE = (48, 32)
CROP = (8, 4, 40, 28)
MARK = "VTB-CANARY "
"""Prefix of the cell's one line of report on stdout."""

CODE = f'''
import json as _json, sys as _sys
_report = {{"python": _sys.version.split()[0], "failed": None}}
def _step(name, action):
    if _report["failed"] is None:
        try:
            action()
        except BaseException as exc:
            _report["failed"], _report["cause"] = name, f"{{type(exc).__name__}}: {{exc}}"
def _imports():
    global numpy, PIL, Image, cv2
    import numpy
    _report["numpy"] = numpy.__version__
    import PIL
    from PIL import Image
    _report["pillow"] = PIL.__version__
    import cv2
    _report["opencv"] = cv2.__version__
def _open_png():
    global _image
    _image = Image.open({IMAGE!r})
    _image.load()
    assert _image.size == {SIZE!r}, f"size {{_image.size}}, expected {SIZE!r}"
def _crop_and_save():
    crop = _image.convert("RGB").crop({CROP!r})
    crop.save({CROP_PNG!r})
    crop.save({CROP_JPEG!r}, quality=90)
def _reopen():
    for name in ({CROP_PNG!r}, {CROP_JPEG!r}):
        with Image.open(name) as again:
            again.load()
            assert again.size == ({CROP[2] - CROP[0]}, {CROP[3] - CROP[1]}), f"{{name}} has size {{again.size}}"
def _numpy():
    pixels = numpy.asarray(_image.convert("RGB"), dtype=numpy.float32)
    assert pixels.shape == ({SIZE[1]}, {SIZE[0]}, 3) and float(pixels.mean()) > 0
def _opencv():
    array = cv2.imread({IMAGE!r})
    assert array is not None, "cv2.imread read nothing"
    gray = cv2.cvtColor(array, cv2.COLOR_BGR2GRAY)
    assert cv2.resize(gray, (8, 8)).shape == (8, 8)
_step("import NumPy, PIL and OpenCV", _imports)
_step("open a PNG with PIL", _open_png)
_step("crop and save as PNG and JPEG with PIL", _crop_and_save)
_step("open the saved PNG and JPEG with PIL", _reopen)
_step("read pixels with NumPy", _numpy)
_step("read and convert the PNG with OpenCV", _opencv)
print({MARK!r} + _json.dumps(_report))
'''
"""The cell: each step runs only if the ones before it passed; the report's ``failed`` names the first that did not."""


def canary_png() -> bytes:
    """The PNG the host puts in the sandbox: a coloured rectangle on a grey ground, made by the host's PIL."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", SIZE, (90, 90, 90))
    ImageDraw.Draw(image).rectangle(CROP, fill=(200, 40, 60))
    data = io.BytesIO()
    image.save(data, format="PNG")
    return data.getvalue()


def run_canary(sandbox: Sandbox, timeout: float = CANARY_TIMEOUT_S) -> dict[str, str]:
    """Run the canary in ``sandbox`` (a fresh one: it writes the files above into its working
    directory) and return the versions found inside (``python``, ``numpy``, ``pillow``, ``opencv``);
    SandboxError names the first step that failed and the cause."""
    sandbox.put_file(IMAGE, canary_png())
    result = sandbox.run(CODE, timeout=timeout)
    lines = [line for line in result.stdout.splitlines() if line.startswith(MARK)]
    if not result.ok or not lines:
        detail = (result.stderr.strip().splitlines() or [""])[-1]
        raise SandboxError(f"the canary cell did not run: {result.error or 'no report on stdout'}"
                           + (f" ({detail})" if detail and detail not in (result.error or "") else ""))
    report = json.loads(lines[-1].removeprefix(MARK))
    if report["failed"] is not None:
        raise SandboxError(f"the canary cell failed at \"{report['failed']}\": {report['cause']}")
    files = sandbox.list_files()
    missing = [name for name in (CROP_PNG, CROP_JPEG) if name not in files]
    if missing:
        raise SandboxError(f"the canary cell saved {', '.join(missing)}, which list_files() does not list ({files})")
    _decodes(sandbox.get_file(CROP_JPEG), CROP_JPEG)
    return {name: str(report[name]) for name in ("python", "numpy", "pillow", "opencv")}


def _decodes(data: bytes, name: str) -> None:
    """Check that ``data``, read back with ``get_file``, is the image the cell saved as ``name``."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            size = image.size
    except (UnidentifiedImageError, OSError) as exc:
        raise SandboxError(f"get_file({name!r}) returned {len(data)} bytes the host cannot decode: {exc}") from exc
    if size != (CROP[2] - CROP[0], CROP[3] - CROP[1]):
        raise SandboxError(f"get_file({name!r}) returned an image of size {size}, not the saved crop's")
