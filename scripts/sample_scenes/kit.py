"""Shared kit of the sample suite: drawing, reference trajectories, rubrics and task assembly.

Everything here is deterministic: no clocks, no unseeded randomness, PNGs written by Pillow
with fixed options. Text uses Pillow's bundled font (``ImageFont.load_default(size=...)``),
which covers ASCII plus a few symbols (``°``, ``·``) only: scene text must stay within those.
"""

from __future__ import annotations

import io
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from PIL import Image, ImageDraw, ImageFont

from vtb_agents.tasks.model import Check, Rubric, Task, TaskImage, ToolStep, Turn

Box = tuple[int, int, int, int]
Color = tuple[int, int, int]

INK: Color = (40, 40, 45)
GREY: Color = (118, 118, 124)


def money(cents: int) -> str:
    """``128682`` -> ``1,286.82`` (amounts are kept in integer cents, so sums are exact)."""
    return f"{cents // 100:,}.{cents % 100:02d}"

# ---------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------


@cache
def font(size: int) -> ImageFont.FreeTypeFont:
    """Pillow's bundled scalable font at ``size`` px (no system fonts needed)."""
    return ImageFont.load_default(size=size)  # type: ignore[return-value]


def rng(seed: int) -> random.Random:
    """A seeded generator; callers use only ``random()`` (stable across Python versions)."""
    return random.Random(seed)


class Canvas:
    """An RGB image with a drawing context and named regions (``marks``) of drawn details.

    Scenes mark the boxes of answer-bearing details as they draw them, so reference
    trajectories crop exactly what was drawn instead of hand-copied coordinates.
    """

    def __init__(self, width: int, height: int, background: Color) -> None:
        self.image = Image.new("RGB", (width, height), background)
        self.draw = ImageDraw.Draw(self.image)
        self.marks: dict[str, Box] = {}

    @property
    def width(self) -> int:
        return self.image.width

    @property
    def height(self) -> int:
        return self.image.height

    def text(self, xy: tuple[float, float], text: str, size: int, fill: Color, *,
             anchor: str = "la", mark: str | None = None) -> Box:
        """Draw ``text`` and return its pixel box (also recorded under ``mark``)."""
        f = font(size)
        self.draw.text(xy, text, font=f, fill=fill, anchor=anchor)
        x0, y0, x1, y1 = self.draw.textbbox(xy, text, font=f, anchor=anchor)
        box = (int(x0), int(y0), int(math.ceil(x1)), int(math.ceil(y1)))
        if mark:
            self.mark(mark, box)
        return box

    def lines(self, xy: tuple[int, int], rows: Sequence[str], size: int, fill: Color, *,
              spacing: float = 1.45, mark: str | None = None) -> Box:
        """Draw ``rows`` top-down from ``xy`` and return the union box."""
        x, y = xy
        boxes = [self.text((x, y + round(i * size * spacing)), row, size, fill)
                 for i, row in enumerate(rows)]
        box = union(boxes)
        if mark:
            self.mark(mark, box)
        return box

    def rect(self, box: Box, fill: Color | None = None, outline: Color | None = None, *,
             width: int = 1, radius: int = 0, mark: str | None = None) -> Box:
        if radius:
            self.draw.rounded_rectangle(box, radius=radius, fill=fill, outline=outline, width=width)
        else:
            self.draw.rectangle(box, fill=fill, outline=outline, width=width)
        if mark:
            self.mark(mark, box)
        return box

    def circle(self, center: tuple[float, float], radius: float, fill: Color | None = None,
               outline: Color | None = None, *, width: int = 1, mark: str | None = None) -> Box:
        cx, cy = center
        box = (round(cx - radius), round(cy - radius), round(cx + radius), round(cy + radius))
        self.draw.ellipse(box, fill=fill, outline=outline, width=width)
        if mark:
            self.mark(mark, box)
        return box

    def mark(self, name: str, box: Box) -> None:
        """Record ``box`` under ``name`` (a second call widens the region)."""
        self.marks[name] = union([self.marks[name], box]) if name in self.marks else box

    def region(self, *names: str, pad: int = 10) -> Box:
        """The padded union of the named marks, clamped to the image."""
        x0, y0, x1, y1 = union([self.marks[n] for n in names])
        return (max(0, x0 - pad), max(0, y0 - pad), min(self.width, x1 + pad), min(self.height, y1 + pad))

    def png(self) -> bytes:
        """The image as PNG bytes (deterministic: no metadata, fixed compression)."""
        buffer = io.BytesIO()
        self.image.save(buffer, format="PNG", optimize=True)
        return buffer.getvalue()


def union(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


def stripes(canvas: Canvas, box: Box, colors: Sequence[Color], step: int, *, vertical: bool = False) -> None:
    """Fill ``box`` with flat bands cycling through ``colors`` (wood, pitch, seats...)."""
    x0, y0, x1, y1 = box
    start, stop = (x0, x1) if vertical else (y0, y1)
    for i, pos in enumerate(range(start, stop, step)):
        end = min(pos + step, stop) - 1
        band = (pos, y0, end, y1) if vertical else (x0, pos, x1, end)
        canvas.rect(band, fill=colors[i % len(colors)])


def grid(canvas: Canvas, box: Box, step: int, color: Color) -> None:
    """Thin grid lines every ``step`` px inside ``box`` (tiles, graph paper)."""
    x0, y0, x1, y1 = box
    for x in range(x0, x1 + 1, step):
        canvas.draw.line((x, y0, x, y1), fill=color)
    for y in range(y0, y1 + 1, step):
        canvas.draw.line((x0, y, x1, y), fill=color)


def text_block(canvas: Canvas, box: Box, color: Color, *, line: int = 14, seed: int = 0) -> None:
    """Grey bars that read as body text at a glance (filler prose without real words)."""
    r = rng(seed)
    x0, y0, x1, y1 = box
    for y in range(y0, y1 - 4, line):
        end = x1 if r.random() > 0.15 else x0 + int((x1 - x0) * (0.3 + 0.6 * r.random()))
        canvas.rect((x0, y, end, y + max(3, line // 3)), fill=color)


def person(canvas: Canvas, feet: tuple[int, int], height: int, shirt: Color, *, number: str | None = None,
           number_size: int = 12, number_color: Color = (255, 255, 255), skin: Color = (205, 160, 125),
           shorts: Color = (30, 30, 40), mark: str | None = None) -> Box:
    """A flat figure standing at ``feet`` with an optional shirt number; returns the figure box."""
    fx, fy = feet
    unit = height / 10
    head_r = unit * 0.9
    torso_top = fy - unit * 7.6
    torso_bottom = fy - unit * 4.4
    half = unit * 1.5
    canvas.circle((fx, torso_top - head_r), head_r, fill=skin)
    canvas.rect((round(fx - half), round(torso_top), round(fx + half), round(torso_bottom)), fill=shirt)
    canvas.rect((round(fx - half), round(torso_bottom), round(fx + half), round(fy - unit * 3)), fill=shorts)
    for side in (-1, 1):
        x = fx + side * unit * 0.8
        canvas.draw.line((x, fy - unit * 3, x, fy), fill=skin, width=max(2, round(unit * 0.7)))
        arm = fx + side * (half + unit * 0.35)
        canvas.draw.line((arm, torso_top + 2, arm, torso_bottom + unit), fill=skin, width=max(2, round(unit * 0.6)))
    if number is not None:
        canvas.text((fx, (torso_top + torso_bottom) / 2), number, number_size, number_color, anchor="mm",
                    mark=mark)
    return (round(fx - half - unit), round(torso_top - 2 * head_r), round(fx + half + unit), fy)


# ---------------------------------------------------------------------------------------------
# Reference trajectories
# ---------------------------------------------------------------------------------------------

ENHANCERS: dict[str | None, str | None] = {
    None: None,
    "autocontrast": "crop = ImageOps.autocontrast(crop, cutoff=1)",
    "sharpen": "crop = crop.filter(ImageFilter.SHARPEN)",
    "gray": "crop = ImageOps.autocontrast(ImageOps.grayscale(crop), cutoff=2)",
}


class Trajectory:
    """Builds the reference tool steps of one task.

    Transformed images are numbered over the whole task (``transformed_image_0.png``, ``_1``,
    ...) and never overwritten, across turns too; every code step is self-contained (its own
    imports) because a replay may run each step in a fresh interpreter.
    """

    def __init__(self) -> None:
        self._next = 0

    def _output(self) -> str:
        name = f"transformed_image_{self._next}.png"
        self._next += 1
        return name

    def zoom(self, image: int, crops: Sequence[tuple[str, Box]], *, scale: int = 3,
             enhance: str | None = None) -> ToolStep:
        """PIL: crop each labelled box of ``image_{image}.png``, upscale, optionally enhance."""
        modules = ", ".join(["Image"] + [m for m in ("ImageFilter", "ImageOps") if m in (ENHANCERS[enhance] or "")])
        parts: list[str | None] = [f"from PIL import {modules}", "",
                 f'img = Image.open("image_{image}.png").convert("RGB")']
        for label, box in crops:
            out = self._output()
            parts += [
                f"# {label}",
                f"crop = img.crop({tuple(box)})",
                f"crop = crop.resize((crop.width * {scale}, crop.height * {scale}), Image.Resampling.LANCZOS)",
                ENHANCERS[enhance],
                f'crop.save("{out}")',
                f'print("{out}:", {json.dumps(label)}, "box", {tuple(box)}, "->", crop.size)',
            ]
        return _code_step(parts)

    def clahe(self, image: int, label: str, box: Box, *, scale: int = 4) -> ToolStep:
        """OpenCV: crop, local contrast equalisation (CLAHE) and upscale, for faint details."""
        out = self._output()
        x0, y0, x1, y1 = box
        parts = [
            "import cv2", "",
            f'img = cv2.imread("image_{image}.png")',
            f"# {label}",
            f"crop = img[{y0}:{y1}, {x0}:{x1}]",
            "gray = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)",
            "gray = cv2.createCLAHE(clipLimit=4.0, tileGridSize=(4, 4)).apply(gray)",
            "gray = cv2.normalize(gray, None, 0, 255, cv2.NORM_MINMAX)",
            f"big = cv2.resize(gray, None, fx={scale}, fy={scale}, interpolation=cv2.INTER_CUBIC)",
            f'cv2.imwrite("{out}", big)',
            f'print("{out}:", {json.dumps(label)}, "crop", crop.shape[1::-1], "->", big.shape[1::-1])',
        ]
        return _code_step(parts)

    def diff(self, before: int, after: int, *, threshold: int = 40) -> ToolStep:
        """NumPy/OpenCV: where did ``image_{after}`` change from ``image_{before}``? Saves a mask."""
        out = self._output()
        parts = [
            "import cv2", "import numpy as np", "",
            f'a = cv2.imread("image_{before}.png")',
            f'b = cv2.imread("image_{after}.png")',
            "change = cv2.absdiff(a, b).max(axis=2)",
            f"mask = (change > {threshold}).astype(np.uint8) * 255",
            "mask = cv2.dilate(mask, np.ones((15, 15), np.uint8))  # merge the glyphs of one changed detail",
            "count, labels, stats, _ = cv2.connectedComponentsWithStats(mask)",
            "regions = sorted((tuple(int(v) for v in s[:4]) for s in stats[1:]), key=lambda r: (r[1], r[0]))",
            'print("changed regions (x, y, w, h):", regions)',
            "overlay = b.copy()",
            "for x, y, w, h in regions:",
            "    cv2.rectangle(overlay, (x, y), (x + w, y + h), (0, 0, 255), 3)",
            f'cv2.imwrite("{out}", overlay)',
            f'print("saved {out}")',
        ]
        return _code_step(parts)

    def count_blobs(self, image: int, label: str, center: tuple[int, int], radius: int, *,
                    min_gray: int, min_area: int = 12) -> ToolStep:
        """OpenCV: count bright blobs inside a circle (colonies on a plate); saves the outlines."""
        out = self._output()
        cx, cy = center
        x0, y0 = cx - radius, cy - radius
        parts = [
            "import cv2", "import numpy as np", "",
            f'img = cv2.imread("image_{image}.png")',
            f"# {label}",
            f"crop = img[{y0}:{cy + radius}, {x0}:{cx + radius}].copy()",
            "inside = np.zeros(crop.shape[:2], np.uint8)",
            f"cv2.circle(inside, ({radius}, {radius}), {radius - 12}, 255, -1)",
            "gray = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)",
            f"blobs = ((gray >= {min_gray}) & (inside > 0)).astype(np.uint8) * 255",
            "count, labels, stats, _ = cv2.connectedComponentsWithStats(blobs)",
            f"found = [s for s in stats[1:] if s[4] >= {min_area}]",
            "for x, y, w, h, _area in found:",
            "    cv2.rectangle(crop, (int(x) - 2, int(y) - 2), (int(x + w) + 1, int(y + h) + 1), (0, 0, 255), 1)",
            "crop = cv2.resize(crop, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC)",
            f'cv2.imwrite("{out}", crop)',
            f'print("{out}:", {json.dumps(label)}, "blobs counted:", len(found))',
        ]
        return _code_step(parts)

    @staticmethod
    def calc(expression: str) -> ToolStep:
        """A calculator step. Every ``^`` is parenthesised so that precedence cannot matter."""
        return ToolStep(tool="calculator", args={"expression": expression})


def _code_step(parts: Sequence[str | None]) -> ToolStep:
    code = "\n".join(p for p in parts if p is not None) + "\n"
    return ToolStep(tool="python_image_processing", args={"code": code})


# ---------------------------------------------------------------------------------------------
# Rubrics and checks
# ---------------------------------------------------------------------------------------------

VU = "visual understanding"
TRUTH = "truthfulness"
FOLLOW = "instruction following"
REASON = "reasoning"
STYLE = "writing style / presentation"


def has_any(*values: str) -> Check:
    return Check(type="contains_any", values=list(values))


def has_all(*values: str) -> Check:
    return Check(type="contains_all", values=list(values))


def lacks(*values: str) -> Check:
    return Check(type="not_contains", values=list(values))


def number(value: float, tolerance: float = 0.0) -> Check:
    return Check(type="number", value=value, tolerance=tolerance)


def regex(pattern: str) -> Check:
    return Check(type="regex", pattern=pattern)


ASKS_QUESTION = regex(r"\?")


@dataclass
class R:
    """A rubric before ids are assigned. ``wrong`` is a plausible wrong answer that must fail
    ``check`` (required for critical rubrics); ``critical=None`` applies the weight rule."""

    description: str
    weight: int
    check: Check | None
    categories: tuple[str, ...] = (VU,)
    subjective: bool = False
    implicit: bool = False
    final: bool = False
    critical: bool | None = None
    wrong: str | None = None


@dataclass
class T:
    """A turn before assembly: images are flat indices into the task's image list."""

    prompt: str
    golden: str
    rubrics: list[R]
    steps: list[ToolStep] = field(default_factory=list)
    images: list[int] = field(default_factory=list)


@dataclass
class SampleTask:
    """A built task plus its negative controls: ``wrong_answers[(turn index, rubric id)]``."""

    task: Task
    wrong_answers: dict[tuple[int, str], str]


def assemble(task_id: str, category: str, domain: str, images: Sequence[bytes], turns: Sequence[T],
             *, scene: str) -> SampleTask:
    """Build the Task: rubric ids ``r1``, ``r2``, ... numbered across the whole task."""
    built: list[Turn] = []
    wrong: dict[tuple[int, str], str] = {}
    counter = 0
    for t_index, spec in enumerate(turns):
        rubrics = []
        for r in spec.rubrics:
            counter += 1
            rid = f"r{counter}"
            critical = r.weight >= 4 if r.critical is None else r.critical
            rubrics.append(Rubric.model_validate({
                "id": rid,
                "description": r.description,
                "weight": r.weight,
                "objective/subjective": "subjective" if r.subjective else "objective",
                "explicit/implicit": "implicit" if r.implicit else "explicit",
                "category": list(r.categories),
                "critical": "yes" if critical else "no",
                "final_answer": "yes" if r.final else "no",
                "check": r.check,
            }))
            if r.wrong is not None:
                wrong[(t_index, rid)] = r.wrong
        built.append(Turn(prompt=spec.prompt, images=list(spec.images), golden_answer=spec.golden,
                          trajectory=list(spec.steps), rubrics=rubrics))
    task = Task(
        id=task_id, category=category, domain=domain, turns=built,
        images=[TaskImage(file=f"image_{i}.png", data=data) for i, data in enumerate(images)],
        metadata={"suite": "vtb-agents sample", "scene": scene},
    )
    return SampleTask(task=task, wrong_answers=wrong)
