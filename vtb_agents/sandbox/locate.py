"""Where in a task image a saved image was cut from, found from its pixels (OpenCV template matching).

Why: the sandbox tracks regions through Pillow only (``region_tracker.py``); a crop made with NumPy
slicing (``img[y0:y1, x0:x1]``) or OpenCV (``cv2.imread``, ``cv2.resize`` of a slice, ``cv2.imwrite``)
carries no region, and the region metric would score such a model 0.0 for a crop it did make. So an
image without a tracked region is looked for in the task's images (the host's own copies, never the
sandbox's): a crop is the same pixels at some scale, so the saved image, scaled down to each candidate
crop size, is matched (normalised cross-correlation on grey levels, which ignores brightness and
contrast changes) against the task image, coarse to fine:

1. candidate crop widths: the saved width divided or multiplied by 1..4 (a crop kept at its size, or
   zoomed by an integer factor: these give exact boxes), and a geometric series (6% steps) from 8
   pixels to the whole image (a zoom to any size), the height following the saved image's aspect ratio;
2. each candidate is matched in a pyramid level of the task image where it is at least 16 pixels high
   and wide (a small crop on the full image, a large one on a reduced copy);
3. the three best (and the best of the exact widths) are refined down the pyramid around their places
   (sizes within 6%, then to the pixel, down to where the crop is :data:`REFINE_SIDE` pixels), and the
   best match counts if its correlation is at least :data:`MIN_SCORE`.

An image of the task image's shape that matches it whole (enhanced, annotated, resized) is found in one
comparison and is no crop.

A flat image (almost no contrast: nothing to match), one larger than the task image, or one with no
match above the threshold is *not located* (None): never a guessed box. Only uniform scaling is
searched: a crop stretched to another aspect ratio, rotated or warped is not located.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import cv2
import numpy as np

from vtb_agents.results import ImageRegion

__all__ = ["MIN_SCORE", "Located", "TaskImageLocator"]

MIN_SCORE = 0.92
"""Least normalised cross-correlation (TM_CCOEFF_NORMED, -1..1) of a match that counts."""
MIN_SIDE = 12
"""Smallest side, in pixels of the pyramid level, of a template matched there."""
MIN_CROP = 12
"""Smallest side, in task pixels, of a crop looked for."""
MIN_STD = 2.0
"""Least standard deviation of grey levels (0..255) of an image worth matching."""
WHOLE_MIN_SCORE = 0.8
"""Least correlation of an image of the task image's shape with the whole of it (marks drawn over it
lower the correlation more than a crop's search allows; another picture is near 0)."""
REFINE_SIDE = 200
"""Shorter side (pixels of a pyramid level) from which a match is not followed to finer levels."""
STEP = 1.1
"""Ratio of successive candidate crop widths (the refinement covers 6% either side)."""


@dataclass(frozen=True)
class Located:
    """A match: the region of the task image and its correlation (0..1)."""

    region: ImageRegion
    score: float


def _grey(data: bytes) -> np.ndarray | None:
    """Encoded image ``data`` as 8-bit grey levels (None when OpenCV cannot decode it)."""
    array = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
    return array if array is not None and array.size else None


def _match(image: np.ndarray, template: np.ndarray) -> tuple[float, tuple[int, int]]:
    """Best TM_CCOEFF_NORMED score of ``template`` in ``image`` and its top-left corner."""
    if template.shape[0] > image.shape[0] or template.shape[1] > image.shape[1] or template.std() < 0.5:
        return -1.0, (0, 0)
    scores = cv2.matchTemplate(image, template, cv2.TM_CCOEFF_NORMED)
    np.nan_to_num(scores, copy=False, nan=-1.0, posinf=-1.0, neginf=-1.0)
    _, best, _, corner = cv2.minMaxLoc(scores)
    return float(best), (int(corner[0]), int(corner[1]))


class _Saved:
    """A saved image and its reductions by 2, 4, ...: a template is made from the smallest one still
    larger than it (a 3200-pixel zoom is not reduced from full size for every candidate)."""

    def __init__(self, grey: np.ndarray) -> None:
        self.grey, self.levels = grey, [grey]
        while min(self.levels[-1].shape) >= 2 * MIN_SIDE:
            self.levels.append(cv2.pyrDown(self.levels[-1]))

    @property
    def shape(self) -> tuple[int, int]:
        return self.grey.shape[0], self.grey.shape[1]

    def resized(self, width: int, height: int) -> np.ndarray:
        """The saved image at ``width`` x ``height``."""
        source = next((level for level in reversed(self.levels)
                       if level.shape[1] >= 2 * width and level.shape[0] >= 2 * height), self.grey)
        shrink = width < source.shape[1]
        return cv2.resize(source, (width, height), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


@dataclass
class _TaskImage:
    name: str
    grey: np.ndarray
    pyramid: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pyramid = [self.grey]
        while min(self.pyramid[-1].shape) >= 4 * MIN_SIDE:
            self.pyramid.append(cv2.pyrDown(self.pyramid[-1]))

    @property
    def size(self) -> tuple[int, int]:
        return self.grey.shape[1], self.grey.shape[0]


def _exact(saved_w: int) -> set[int]:
    """Crop widths that give the saved width by an integer zoom (1..4) or reduction (2..4)."""
    return {round(saved_w / k) for k in (1, 2, 3, 4)} | {saved_w * k for k in (2, 3, 4)}


def _widths(saved_w: int, saved_h: int, size: tuple[int, int]) -> list[int]:
    """Candidate crop widths in task pixels (see the module), within the task image, whose crop is at
    least :data:`MIN_CROP` pixels high and wide."""
    width, height = size
    most = min(width, math.floor(height * saved_w / saved_h))
    least = max(MIN_CROP, math.ceil(MIN_CROP * saved_w / saved_h))
    series, current = set(), float(least)
    while current <= most:
        series.add(round(current))
        current *= STEP
    return sorted(w for w in _exact(saved_w) | series | {most} if least <= w <= most)


def _level_for(width: int, height: int, levels: int) -> int:
    """The coarsest pyramid level where a ``width`` x ``height`` crop is still :data:`MIN_SIDE` wide and high."""
    level = 0
    while level + 1 < levels and min(width, height) / 2 ** (level + 1) >= MIN_SIDE:
        level += 1
    return level


def _best_near(level_image: np.ndarray, saved: _Saved, x: int, y: int, widths: Sequence[int], aspect: float,
               margin: int) -> tuple[float, int, int, int, int]:
    """Best (score, x, y, width, height) of ``saved`` scaled to each of ``widths`` within ``margin``
    pixels of (x, y) in ``level_image``."""
    best = (-1.0, x, y, widths[0], max(1, round(widths[0] * aspect)))
    for width in widths:
        height = max(1, round(width * aspect))
        x0, y0 = max(0, x - margin), max(0, y - margin)
        window = level_image[y0:y + height + margin, x0:x + width + margin]
        score, (dx, dy) = _match(window, saved.resized(width, height))
        if score > best[0]:
            best = (score, x0 + dx, y0 + dy, width, height)
    return best


def _refine(task: _TaskImage, saved: _Saved, width: int, x: int, y: int, level: int) -> tuple[float, int, int,
                                                                                                int, int]:
    """A coarse match (pixels of ``level``) followed down the pyramid, as (score, x, y, width, height) in
    full-image pixels: sizes within 6% at the coarse level, then within 3 pixels and positions within 3
    pixels at each finer one (with the exact widths of :func:`_exact` near, on the full image). It stops
    at the finest level where the crop is no larger than the saved image (a reduced crop is compared
    at its own resolution, not blown up), or where its shorter side reaches :data:`REFINE_SIDE` pixels
    (a box then within half a percent of its size: a large crop is not matched at full size)."""
    saved_h, saved_w = saved.shape
    aspect = saved_h / saved_w
    widths = sorted({max(2, round(width * (1 + d / 100))) for d in range(-6, 7)})
    score, x, y, width, height = _best_near(task.pyramid[level], saved, x, y, widths, aspect, 3)
    while level > 0 and 2 * width <= saved_w * 1.05 and min(width, round(width * aspect)) < REFINE_SIDE:
        level -= 1
        x, y, width = 2 * x, 2 * y, 2 * width
        widths = list(range(width - 3, width + 4))
        if level == 0:
            widths = sorted(set(widths) | {w for w in _exact(saved_w) if abs(w - width) <= 4})
        score, x, y, width, height = _best_near(task.pyramid[level], saved, x, y, [w for w in widths if w >= 2],
                                                aspect, 3)
    scale = 2 ** level
    return score, x * scale, y * scale, width * scale, height * scale


def _whole(task: _TaskImage, saved: _Saved) -> Located | None:
    """The whole task image when the saved image is it (resized, enhanced, annotated): compared on the
    coarsest pyramid level, one correlation instead of a search."""
    top = task.pyramid[-1]
    score, _ = _match(top, saved.resized(top.shape[1], top.shape[0]))
    if score < WHOLE_MIN_SCORE:
        return None
    width, height = task.size
    return Located(ImageRegion(image=task.name, box=(0, 0, width, height), image_size=task.size), round(score, 4))


def _search(task: _TaskImage, saved: _Saved) -> Located | None:
    saved_h, saved_w = saved.shape
    aspect = saved_h / saved_w
    if abs(aspect - task.size[1] / task.size[0]) < 0.01 and (whole := _whole(task, saved)) is not None:
        return whole
    coarse: list[tuple[float, int, int, int, int]] = []  # score, width, x, y (pixels of the level), level
    for crop_w in _widths(saved_w, saved_h, task.size):
        crop_h = max(1, round(crop_w * aspect))
        level = _level_for(crop_w, crop_h, len(task.pyramid))
        scale = 2 ** level
        template = saved.resized(max(1, round(crop_w / scale)), max(1, round(crop_h / scale)))
        score, (x, y) = _match(task.pyramid[level], template)
        coarse.append((score, crop_w // scale if crop_w % scale == 0 else round(crop_w / scale), x, y, level))
    exact = _exact(saved_w)
    chosen = sorted(coarse, reverse=True)[:3]
    chosen += sorted((c for c in coarse if c[1] * 2 ** c[4] in exact and c not in chosen), reverse=True)[:1]
    found = [_refine(task, saved, width, x, y, level) for _, width, x, y, level in chosen]
    best = max(found, default=None)
    if best is None or best[0] < MIN_SCORE:
        return None
    score, x, y, width, height = best
    right, bottom = min(task.size[0], x + width), min(task.size[1], y + height)
    region = ImageRegion(image=task.name, box=(x, y, right, bottom), image_size=task.size)
    return Located(region, round(score, 4))


class TaskImageLocator:
    """Locates saved images in a task's images (``(name, encoded bytes)``, e.g. ``image_0.png``), each
    decoded once, when the first image is looked for (a turn whose crops are all tracked decodes none)."""

    def __init__(self, images: Sequence[tuple[str, bytes]]) -> None:
        self._encoded = list(images)
        self._images: list[_TaskImage] | None = None

    def _decoded(self) -> list[_TaskImage]:
        if self._images is None:
            self._images = [_TaskImage(name, grey) for name, data in self._encoded if (grey := _grey(data)) is not None]
        return self._images

    def locate(self, data: bytes) -> Located | None:
        """The region of a task image that encoded image ``data`` shows, or None (not located)."""
        grey = _grey(data)
        if grey is None or grey.std() < MIN_STD:
            return None
        saved = _Saved(grey)
        found = [hit for task in self._decoded() if (hit := _search(task, saved)) is not None]
        return max(found, key=lambda hit: hit.score, default=None)
