"""Image-region tracking inside the sandbox kernel: which part of a task image a saved image shows.

The sandbox worker runs this file's source in its kernel (``worker.py``, setup ``"tracker"``) before
any code cell; it is standard library only and touches nothing until the code imports Pillow. Then
it follows every PIL image back to a task image (``image_N.png`` in the working directory):

* ``Image.open("image_N.png")`` shows the whole task image: box ``(0, 0, W, H)`` of ``image_N.png``.
  An image opened from a PNG this tracker saved shows the region recorded in that file, so crops of
  saved crops (later calls, zoom views of views) map back to the original.
* ``crop(box)`` maps ``box`` (clamped to the image, rounded as Pillow rounds it) from the image's
  pixels into the original's: an image always shows its whole region, so its scale is the region's
  size over its own size (``resize``, ``thumbnail``, ``reduce`` keep the region and change the scale;
  ``resize(..., box=...)`` and ``reduce(..., box=...)`` map their box like a crop).
* Every other operation that Pillow builds through ``Image._new`` (``convert``, ``filter``,
  ``point``, ``copy``, ``transpose``, ``rotate``, ``ImageOps.autocontrast``/``grayscale``, ...) keeps
  the region, which travels in ``image.info[REGION_KEY]``; ``Image.blend`` (``ImageEnhance``) keeps
  the region of either input.
* ``save`` to PNG writes the region as a ``tEXt`` chunk ``vtb-region`` (JSON ``{"image", "box",
  "image_size"}``, box in the original's pixels); the host reads it back (``regions.read_region``).

Not tracked: pixels that leave Pillow (NumPy arrays, OpenCV ``imread``/``imwrite``, slicing), other
file formats, geometry-changing transforms other than the ones above (``transform``, ``ImageOps.expand``).
Model code can remove or forge all of this: it only misleads the region metric about itself, never
a grade.
"""

from __future__ import annotations

import json
import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REGION_KEY = "vtb-region"
"""Key of the region in ``Image.info`` and of the PNG text chunk that carries it."""
TASK_IMAGE = re.compile(r"image_\d+\.png")
"""File names of task images in the working directory (DESIGN.md sandbox contract)."""

Box = tuple[float, float, float, float]


def map_box(region: Box, size: tuple[int, int], box: Box) -> Box | None:
    """``box`` (pixels of an image of ``size`` that shows ``region`` of the original) in the
    original's pixels; clamped to the image first, None when nothing of it is inside.

    >>> map_box((100, 200, 300, 300), (400, 200), (200, 0, 400, 100))
    (200.0, 200.0, 300.0, 250.0)
    """
    width, height = size
    left, top = max(0.0, float(box[0])), max(0.0, float(box[1]))
    right, bottom = min(float(width), float(box[2])), min(float(height), float(box[3]))
    if right <= left or bottom <= top or width <= 0 or height <= 0:
        return None
    x0, y0, x1, y1 = region
    sx, sy = (x1 - x0) / width, (y1 - y0) / height
    return (x0 + left * sx, y0 + top * sy, x0 + right * sx, y0 + bottom * sy)


def region_json(image: str, box: Box, image_size: tuple[int, int]) -> str:
    """The JSON text of a region, as kept in ``info`` and in saved PNGs."""
    return json.dumps({"image": image, "box": list(box), "image_size": list(image_size)})


def _parse(text: object) -> tuple[str, Box, tuple[int, int]] | None:
    """(image, box, image size) of a region's JSON text; None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
        image, box, size = str(data["image"]), tuple(float(v) for v in data["box"]), data["image_size"]
        return (image, (box[0], box[1], box[2], box[3]), (int(size[0]), int(size[1])))
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def _task_image(name: object) -> str | None:
    """The task image ``name`` points at (``image_N.png`` in the working directory), else None."""
    if not isinstance(name, (str, os.PathLike)):
        return None
    path = os.fspath(name)
    if not isinstance(path, str) or not TASK_IMAGE.fullmatch(os.path.basename(path)):
        return None
    return os.path.basename(path) if os.path.dirname(os.path.abspath(path)) == os.getcwd() else None


def _child(parent: Any, child: Any, box: Box | None) -> Any:
    """Set ``child``'s region: ``box`` (pixels of ``parent``) mapped, or the parent's region when
    ``box`` is None; no region when the parent has none or the box is outside it."""
    child.info.pop(REGION_KEY, None)
    parsed = _parse(parent.info.get(REGION_KEY))
    if parsed is None:
        return child
    image, region, image_size = parsed
    mapped = region if box is None else map_box(region, parent.size, box)
    if mapped is not None:
        child.info[REGION_KEY] = region_json(image, mapped, image_size)
    return child


def _patch(module: Any) -> None:
    """Wrap ``PIL.Image``'s ``open``, ``blend`` and the geometry methods of ``Image`` (see above)."""
    image_cls = module.Image
    open_, blend, crop, resize, reduce, save = (module.open, module.blend, image_cls.crop, image_cls.resize,
                                                image_cls.reduce, image_cls.save)

    def tracked_open(fp: Any, *args: Any, **kwargs: Any) -> Any:
        image = open_(fp, *args, **kwargs)
        name = fp if isinstance(fp, (str, os.PathLike)) else getattr(fp, "name", None)
        if _parse(image.info.get(REGION_KEY)) is None:
            image.info.pop(REGION_KEY, None)
            task_image = _task_image(name)
            if task_image is not None:
                image.info[REGION_KEY] = region_json(task_image, (0, 0, *image.size), image.size)
        return image

    def tracked_blend(im1: Any, im2: Any, alpha: float) -> Any:
        out = blend(im1, im2, alpha)
        return _child(im2 if REGION_KEY in im2.info else im1, out, None)

    def tracked_crop(self: Any, box: Any = None) -> Any:
        out = crop(self, box)
        return _child(self, out, None if box is None else tuple(round(v) for v in box))

    def tracked_resize(self: Any, size: Any, *args: Any, **kwargs: Any) -> Any:
        box = kwargs.get("box", args[1] if len(args) > 1 else None)
        return _child(self, resize(self, size, *args, **kwargs), box)

    def tracked_reduce(self: Any, factor: Any, box: Any = None) -> Any:
        return _child(self, reduce(self, factor, box), box)

    def tracked_save(self: Any, fp: Any, format: Any = None, **params: Any) -> Any:
        text = self.info.get(REGION_KEY)
        name = os.fspath(fp) if isinstance(fp, (str, os.PathLike)) else ""
        if _parse(text) is not None and (str(format or "").upper() == "PNG"
                                         or (format is None and name.lower().endswith(".png"))):
            from PIL.PngImagePlugin import PngInfo

            given, info, ours = params.get("pnginfo"), PngInfo(), REGION_KEY.encode() + b"\0"
            info.chunks = [c for c in getattr(given, "chunks", []) if not c[1].startswith(ours)]  # the user's chunks
            info.add_text(REGION_KEY, text)
            params["pnginfo"] = info
        return save(self, fp, format, **params)

    for wrapper, original in ((tracked_crop, crop), (tracked_resize, resize), (tracked_reduce, reduce),
                              (tracked_save, save), (tracked_open, open_), (tracked_blend, blend)):
        wrapper.__doc__, wrapper.__name__ = original.__doc__, original.__name__
    module.open, module.blend = tracked_open, tracked_blend
    image_cls.crop, image_cls.resize, image_cls.reduce, image_cls.save = (tracked_crop, tracked_resize,
                                                                         tracked_reduce, tracked_save)


class _Loader:
    """Runs the real loader of ``PIL.Image``, then patches the module."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        _patch(module)


class RegionFinder:
    """A ``sys.meta_path`` finder that hands ``PIL.Image`` to :class:`_Loader`."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "PIL.Image":
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _Loader(spec.loader)  # type: ignore[assignment]  # a Loader by duck typing
                    return spec
        return None


def install() -> None:
    """Track regions from now on: patch ``PIL.Image`` now if imported, else when it is."""
    if "PIL.Image" in sys.modules:
        _patch(sys.modules["PIL.Image"])
    else:
        sys.meta_path.insert(0, RegionFinder())


if __name__ == "__vtb_region_tracker__":  # run by the worker's kernel (worker.py)
    install()
