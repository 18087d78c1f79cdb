"""Validation of task data: errors that make a task unusable, warnings worth a look.

Every problem names the task, the 1-based turn where there is one, the field and the file.
"""

from __future__ import annotations

import warnings
from collections import Counter
from io import BytesIO
from pathlib import Path
from typing import Iterable

from PIL import Image, UnidentifiedImageError

from vtb_agents.safefs import UnsafePath, relative_name
from vtb_agents.tasks.errors import Problem, TaskLoadError
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.normalize import CATEGORIES, DOMAINS, SINGLE_TURN_CATEGORIES
from vtb_agents.tasks.sources import iter_source

DEFAULT_MAX_PIXELS = 50_000_000
"""Images with more pixels are refused as likely decompression bombs (VTB images are far smaller)."""


def check_image(data: bytes, max_pixels: int) -> str | None:
    """Why the encoded image ``data`` is unusable, or None when it decodes within ``max_pixels``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(BytesIO(data)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    return (f"image is {width}x{height} = {width * height:,} pixels, over the limit of "
                            f"{max_pixels:,} (possible decompression bomb)")
                image.verify()
    except Image.DecompressionBombError as exc:
        return f"possible decompression bomb: {exc}"
    except UnidentifiedImageError:
        return "cannot decode image: not a known image format"
    except Exception as exc:  # PIL raises many unrelated classes for corrupt data
        return f"cannot decode image: {type(exc).__name__}: {exc}"
    return None


def validate_task(task: Task, max_pixels: int = DEFAULT_MAX_PIXELS) -> list[Problem]:
    """Problems of one loaded task (duplicate ids across tasks are :func:`validate_tasks`' job)."""
    source = task.metadata.get("source")
    problems: list[Problem] = []

    def add(severity: str, field: str, message: str, turn: int | None = None) -> None:
        problems.append(Problem(severity, task.id, field, message, turn=turn, source=source))  # type: ignore[arg-type]

    if not task.turns:
        add("error", "turns", "task has no turns")
    used: set[int] = set()
    for t, turn in enumerate(task.turns, start=1):
        if not turn.prompt.strip():
            add("error", "prompt", "empty prompt", t)
        for index in turn.images:
            if not 0 <= index < len(task.images):
                add("error", "images", f"image index {index} is out of range (task has {len(task.images)})", t)
            used.add(index)
        ids = Counter(r.id for r in turn.rubrics)
        for rubric_id in sorted(i for i, n in ids.items() if n > 1):
            add("error", f"rubrics.{rubric_id}", "duplicate rubric id in this turn", t)
        for rubric in turn.rubrics:
            if not 1 <= rubric.weight <= 5:
                add("error", f"rubrics.{rubric.id}.weight", f"weight {rubric.weight} is outside 1..5", t)
            if rubric.critical != rubric.is_critical("weight"):
                add("warning", f"rubrics.{rubric.id}.critical",
                    f"critical flag {'yes' if rubric.critical else 'no'} disagrees with the weight rule "
                    f"(weight {rubric.weight}; critical means weight >= 4)", t)
    for index, image in enumerate(task.images):
        field = f"images[{index}] ({image.file})"
        try:
            relative_name(image.file)
            data = image.read_bytes()
        except UnsafePath as exc:
            add("error", f"images[{index}].file", exc.reason)
            continue
        except OSError as exc:
            add("error", field, f"missing or unreadable image file: {exc.strerror or exc}")
            continue
        reason = check_image(data, max_pixels)
        if reason:
            add("error", field, reason)
        elif index not in used:
            add("warning", field, "image is not shown in any turn")
    if task.turns and not any(turn.rubrics for turn in task.turns):
        add("error", "rubrics", "task has no rubrics")
    elif task.turns and not any(r.is_critical("weight") for _, r in task.rubrics):
        add("warning", "rubrics", "task has no critical rubric (weight >= 4): it passes whatever the answer")
    if task.category not in CATEGORIES:
        add("warning", "category", f"unknown category {task.category_raw!r} (kept as {task.category!r})")
    elif (task.category in SINGLE_TURN_CATEGORIES) != (len(task.turns) == 1):
        add("warning", "turns", f"{len(task.turns)} turn(s) is unusual for category {task.category}")
    if task.domain not in DOMAINS:
        add("warning", "domain", f"unknown domain {task.domain_raw!r} (kept as {task.domain!r})")
    return problems


def validate_tasks(items: Iterable[Task | TaskLoadError], max_pixels: int = DEFAULT_MAX_PIXELS) -> list[Problem]:
    """Problems of every task and load error in ``items``, including duplicate task ids."""
    problems: list[Problem] = []
    seen: dict[str, str | None] = {}
    for item in items:
        if isinstance(item, TaskLoadError):
            problems.append(item.problem)
            continue
        source = item.metadata.get("source")
        if item.id in seen:
            problems.append(Problem("error", item.id, "id", f"duplicate task id (also in {seen[item.id]})",
                                    source=source))
        seen[item.id] = source
        problems.extend(validate_task(item, max_pixels))
    return problems


def validate_source(spec: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> list[Problem]:
    """Load and validate every task of ``spec`` (see :func:`~vtb_agents.tasks.sources.iter_source`)."""
    return validate_tasks(iter_source(spec), max_pixels)
