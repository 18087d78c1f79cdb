"""Local task directories: one folder per task holding ``task.json`` and its image files.

This is the format of the bundled sample suite and of users' own tasks; ``vtb tasks import``
converts the dataset's parquet into it.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task

TASK_FILE = "task.json"


def describe_validation_error(error: ValidationError) -> tuple[str, int | None, str]:
    """Turn pydantic's first error into (field path, 1-based turn or None, message)."""
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"]]
    turn = None
    if len(loc) >= 2 and loc[0] == "turns" and loc[1].isdigit():
        turn = int(loc[1]) + 1
        loc = loc[2:]
    field = ".".join(loc) or "(task)"
    more = f" (and {len(error.errors()) - 1} more)" if len(error.errors()) > 1 else ""
    return field, turn, f"{first['msg']}{more}"


def load_task_dir(folder: Path) -> Task:
    """Load one task folder; image paths are resolved but not opened (validation opens them)."""
    folder = Path(folder)
    source = folder / TASK_FILE
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskLoadError(folder.name, TASK_FILE, "missing task file", source=str(source)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TaskLoadError(folder.name, TASK_FILE, f"unreadable JSON: {exc}", source=str(source)) from None
    task_id = str(data.get("id", folder.name)) if isinstance(data, dict) else folder.name
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        field, turn, message = describe_validation_error(exc)
        raise TaskLoadError(task_id, field, message, turn=turn, source=str(source)) from None
    for image in task.images:
        image.path = folder / image.file
    task.metadata.setdefault("source", str(folder))
    return task


def write_task_dir(task: Task, root: Path) -> Path:
    """Write ``task`` as ``root/<task id>/`` (task.json plus image files) and return the folder."""
    folder = Path(root) / safe_dirname(task.id)
    folder.mkdir(parents=True, exist_ok=True)
    for image in task.images:
        (folder / image.file).write_bytes(image.read_bytes())
    data = task.model_dump(mode="json", exclude={"metadata": {"source"}})
    tmp = folder / (TASK_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(folder / TASK_FILE)
    return folder


def safe_dirname(task_id: str) -> str:
    """A folder name for ``task_id`` that cannot escape its parent directory."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id).strip(".")
    return name or "task"


def task_dirs(root: Path) -> list[Path]:
    """The task folders under ``root`` (``root`` itself if it holds a task file), sorted."""
    root = Path(root)
    if (root / TASK_FILE).is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / TASK_FILE).is_file())
