"""Authoring new tasks: ``vtb tasks new`` scaffolds a task folder with a rubric template.

Why: the paper's tasks are written by domain experts, then reviewed; a scaffold gives an author the
dataset's own shape (turns, images, rubrics with their keys) and a ``review`` block in state
``draft``, so that ``vtb tasks list --status accepted`` (and ``vtb run --status accepted``) later
picks the finished ones. Its texts start with :data:`TODO`, which validation refuses ("still TODO"),
so an untouched scaffold can neither validate nor run.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from vtb_agents.tasks.local import TASK_FILE, safe_dirname
from vtb_agents.tasks.model import Review, Task
from vtb_agents.tasks.normalize import CATEGORIES, DOMAINS, SINGLE_TURN_CATEGORIES, normalize_category, normalize_domain
from vtb_agents.tasks.validate import TODO, hidden_characters_problem

CATEGORY_NAMES = {"region_switch": "Region Switch Q&A", "hybrid_tool": "Hybrid Tool Reasoning",
                  "follow_up": "Follow-up Test", "temporal": "Temporal Visual Reasoning",
                  "progressive": "Progressive Visual Reasoning"}
"""The paper's names of the categories, written as the raw category of a new task."""



class AuthoringError(ValueError):
    """A scaffold that cannot be written as asked (names the task and the reason)."""


def rubric_template(turn: int) -> dict[str, dict[str, object]]:
    """Two rubrics in VTB format for ``turn`` (1-based): a critical final-answer one and a style one."""
    return {
        f"t{turn}-answer": {"description": f"{TODO}the final answer states ... (turn {turn})", "weight": 5,
                            "critical": "yes", "objective/subjective": "objective",
                            "explicit/implicit": "explicit", "category": ["visual understanding"],
                            "final_answer": "yes"},
        f"t{turn}-style": {"description": f"{TODO}the answer is concise and shows its reading of the image",
                           "weight": 2, "critical": "no", "objective/subjective": "subjective",
                           "explicit/implicit": "implicit", "category": ["writing style / presentation"],
                           "final_answer": "no"},
    }


def _image_suffix(path: Path, task_id: str) -> str:
    try:
        with Image.open(path) as image:
            image.verify()
            kind = (image.format or "png").lower()
    except FileNotFoundError:
        raise AuthoringError(f"task {task_id!r}: image {path} does not exist") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise AuthoringError(f"task {task_id!r}: {path} is not a readable image ({exc})") from None
    return {"jpeg": ".jpg"}.get(kind, f".{kind}")


def scaffold_task(task_id: str, *, category: str, domain: str, images: list[Path], root: Path,
                  turns: int | None = None) -> Path:
    """Write ``root/<task_id>/`` (task.json with prompts, golden answers and rubrics to fill in, the
    images as ``image_{i}``) and return the folder. Every image is shown in turn 1."""
    hidden = hidden_characters_problem(task_id, "the id")
    if hidden:
        raise AuthoringError(f"task {task_id!r}: {hidden}")
    slug_category, slug_domain = normalize_category(category), normalize_domain(domain)
    if slug_category not in CATEGORIES:
        raise AuthoringError(f"task {task_id!r}: unknown category {category!r} (one of {', '.join(CATEGORIES)})")
    if slug_domain not in DOMAINS:
        raise AuthoringError(f"task {task_id!r}: unknown domain {domain!r} (one of {', '.join(DOMAINS)}, "
                             "or a STEM subject such as chemistry)")
    if not images:
        raise AuthoringError(f"task {task_id!r}: give at least one --image")
    single = slug_category in SINGLE_TURN_CATEGORIES
    count = turns or (1 if single else 2)
    if count < 1 or (single and count != 1):
        raise AuthoringError(f"task {task_id!r}: {count} turn(s) do not fit category {slug_category}")
    folder = Path(root) / safe_dirname(task_id)
    if folder.exists():
        raise AuthoringError(f"task {task_id!r}: {folder} already exists")
    suffixes = [_image_suffix(Path(p), task_id) for p in images]
    data = {
        "id": task_id, "category": CATEGORY_NAMES[slug_category], "domain": domain,
        "images": [{"file": f"image_{i}{suffix}"} for i, suffix in enumerate(suffixes)],
        "turns": [{"prompt": f"{TODO}the user's question for turn {n}",
                   "images": list(range(len(images))) if n == 1 else [],
                   "golden_answer": f"{TODO}the reference answer for turn {n}", "trajectory": [],
                   "rubrics": rubric_template(n)} for n in range(1, count + 1)],
        "review": Review().model_dump(),
    }
    Task.model_validate(data)  # the template itself must be a valid task
    folder.mkdir(parents=True)
    for i, (source, suffix) in enumerate(zip(images, suffixes)):
        (folder / f"image_{i}{suffix}").write_bytes(Path(source).read_bytes())
    (folder / TASK_FILE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder
