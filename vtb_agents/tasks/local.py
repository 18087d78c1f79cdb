"""Local task directories: one folder per task holding ``task.json`` and its image files.

This is the format of the bundled sample suite and of users' own tasks; ``vtb tasks import``
converts the dataset's parquet into it.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from vtb_agents.safefs import UnsafePath, check_in_dir, read_in_dir, write_in_dir
from vtb_agents.tasks import jsontext
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
    """Load one task folder. Image files must be regular files inside it, named without ``..``
    and reached without symlinks (refused here, naming ``images[i].file``); they are checked but
    not read (validation reads them, and every later read goes through the same checks)."""
    folder = Path(folder)
    source = folder / TASK_FILE
    try:
        data = jsontext.loads(read_in_dir(folder, TASK_FILE).decode("utf-8"))
    except FileNotFoundError:
        raise TaskLoadError(folder.name, TASK_FILE, "missing task file", source=str(source)) from None
    except UnsafePath as exc:
        raise TaskLoadError(folder.name, TASK_FILE, exc.reason, source=str(source)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TaskLoadError(folder.name, TASK_FILE, f"unreadable JSON: {exc}", source=str(source)) from None
    task_id = str(data.get("id", folder.name)) if isinstance(data, dict) else folder.name
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        field, turn, message = describe_validation_error(exc)
        raise TaskLoadError(task_id, field, message, turn=turn, source=str(source)) from None
    for index, image in enumerate(task.images):
        try:
            check_in_dir(folder, image.file)
        except UnsafePath as exc:
            raise TaskLoadError(task_id, f"images[{index}].file", exc.reason, source=str(source)) from None
        except OSError:
            pass  # missing or unreadable: validation reports it with the task's other problems
        image.folder, image.path = folder, folder / image.file
    task.metadata.setdefault("source", str(folder))
    return task


def write_task_dir(task: Task, root: Path) -> Path:
    """Write ``task`` as ``root/<task id>/`` (task.json plus image files) and return the folder.

    Nothing is written outside ``root``: file names are checked and no symlink is followed.
    """
    name = safe_dirname(task.id)
    for image in task.images:
        write_in_dir(Path(root), f"{name}/{image.file}", image.read_bytes())
    data = task.model_dump(mode="json", exclude={"metadata": {"source"}})
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_in_dir(Path(root), f"{name}/{TASK_FILE}", text.encode("utf-8"))
    return Path(root) / name


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
