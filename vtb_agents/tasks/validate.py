"""Validation of task data: errors that make a task unusable, warnings worth a look.

Every problem names the task, the 1-based turn where there is one, the field and the file.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Iterable, Sequence

from PIL import Image, UnidentifiedImageError

from vtb_agents.defaults import DEFAULT_MAX_PIXELS
from vtb_agents.safefs import UnsafePath, relative_name
from vtb_agents.tasks.errors import Problem, TaskLoadError
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.normalize import CATEGORIES, DOMAINS, SINGLE_TURN_CATEGORIES
from vtb_agents.tasks.sources import iter_source

INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs"})
"""Unicode categories refused in ids and file names: controls, format characters (bidirectional
overrides such as U+202E, zero-width characters), private use, surrogates, unassigned code points,
and separators (every space but the ASCII one): they hide or reorder what a report or a file name shows."""
TODO = "TODO: "
"""Start of every placeholder text of a ``vtb tasks new`` scaffold; a prompt, golden answer or rubric
description that still starts with it fails validation (:data:`STILL_TODO`)."""
STILL_TODO = "still TODO: replace the placeholder that `vtb tasks new` wrote"
"""The error of a text field that still holds a scaffold's placeholder (``TODO: ...``)."""


def invisible_characters(text: str) -> list[str]:
    """The characters of ``text`` that an id or file name must not hold (see
    :data:`INVISIBLE_CATEGORIES`), each as ``U+XXXX NAME``; empty when ``text`` is clean."""
    found = dict.fromkeys(c for c in text if c != " " and unicodedata.category(c) in INVISIBLE_CATEGORIES)
    return [f"U+{ord(c):04X} {unicodedata.name(c, unicodedata.category(c))}" for c in found]


def hidden_characters_problem(name: str, what: str) -> str | None:
    """Why ``name`` (``what`` it is: a task id, a file name) is refused, or None when it is clean."""
    hidden = invisible_characters(name)
    return f"{what} holds control, bidirectional or invisible character(s): {', '.join(hidden)}" if hidden else None


def is_todo(text: str) -> bool:
    """Whether ``text`` is still a scaffold placeholder (starts with ``TODO``)."""
    return text.lstrip().startswith(TODO.strip())


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

    def check_name(field: str, name: str, what: str, turn: int | None = None) -> bool:
        reason = hidden_characters_problem(name, what)
        if reason:
            add("error", field, reason, turn)
        return reason is None

    check_name("id", task.id, "task id")
    if not task.turns:
        add("error", "turns", "task has no turns")
    used: set[int] = set()
    for t, turn in enumerate(task.turns, start=1):
        if not turn.prompt.strip():
            add("error", "prompt", "empty prompt", t)
        if is_todo(turn.prompt):
            add("error", "prompt", STILL_TODO, t)
        if is_todo(turn.golden_answer):
            add("error", "golden_answer", STILL_TODO, t)
        for index in turn.images:
            if not 0 <= index < len(task.images):
                add("error", "images", f"image index {index} is out of range (task has {len(task.images)})", t)
            used.add(index)
        ids = Counter(r.id for r in turn.rubrics)
        for rubric_id in sorted(i for i, n in ids.items() if n > 1):
            add("error", f"rubrics.{rubric_id}", "duplicate rubric id in this turn", t)
        for rubric in turn.rubrics:
            check_name(f"rubrics.{rubric.id}", rubric.id, "rubric id", t)
            if is_todo(rubric.description):
                add("error", f"rubrics.{rubric.id}.description", STILL_TODO, t)
            if not 1 <= rubric.weight <= 5:
                add("error", f"rubrics.{rubric.id}.weight", f"weight {rubric.weight} is outside 1..5", t)
            if rubric.critical != rubric.is_critical("weight"):
                add("warning", f"rubrics.{rubric.id}.critical",
                    f"critical flag {'yes' if rubric.critical else 'no'} disagrees with the weight rule "
                    f"(weight {rubric.weight}; critical means weight >= 4)", t)
    for index, image in enumerate(task.images):
        field = f"images[{index}] ({image.file})"
        if not check_name(f"images[{index}].file", image.file, "image file name"):
            continue
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


@dataclass(frozen=True)
class Screening:
    """What validation leaves of a selection: the tasks without errors, and the errors of the others
    (every error, grouped by task id, in the order found)."""

    tasks: list[Task]
    rejected: dict[str, list[Problem]]


def screen_tasks(items: Sequence[Task | TaskLoadError], max_pixels: int = DEFAULT_MAX_PIXELS) -> Screening:
    """Split ``items`` into valid tasks and rejected ones, with :func:`validate_tasks`' rules: a run
    refuses (or skips) a rejected task before any request, instead of failing on it mid-run.

    Images are checked from their headers (a decompression bomb is refused before any pixel is
    decoded), so screening a full suite costs about one read of its image files.
    """
    rejected: dict[str, list[Problem]] = {}
    for problem in validate_tasks(items, max_pixels):
        if problem.severity == "error":
            rejected.setdefault(problem.task_id, []).append(problem)
    return Screening([t for t in items if isinstance(t, Task) and t.id not in rejected], rejected)
