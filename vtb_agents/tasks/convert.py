"""Convert between dataset rows and local task directories (``vtb tasks import`` / ``export``).

Why: runs and the sample suite use task directories; the public dataset is parquet. Import
writes every loaded task that passes validation and reports every failed row or task (never
silently dropped; a task with validation errors is not written at all, and nothing is ever
written outside the output folder); export is the inverse, in the dataset's current schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.local import safe_dirname, write_task_dir
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.parquet import write_parquet
from vtb_agents.tasks.validate import validate_task


@dataclass
class ImportReport:
    """What an import did: tasks written and rows (or tasks) that could not be written."""

    written: int = 0
    errors: list[TaskLoadError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every row became a task directory."""
        return not self.errors


def import_tasks(tasks: Iterable[Task | TaskLoadError], out: Path) -> ImportReport:
    """Write each valid Task as a task directory under ``out``; collect load, validation and write errors.

    Two tasks whose ids map to the same folder name would overwrite each other: the second
    is reported as an error on field ``id`` instead.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = ImportReport()
    folders: dict[str, str] = {}
    for item in tasks:
        if isinstance(item, TaskLoadError):
            report.errors.append(item)
            continue
        source = item.metadata.get("source")
        name = safe_dirname(item.id)
        if name in folders:
            report.errors.append(TaskLoadError(
                item.id, "id", f"folder {name!r} already written for task {folders[name]!r}",
                source=source))
            continue
        invalid = [p for p in validate_task(item) if p.severity == "error"]
        if invalid:
            report.errors.extend(TaskLoadError.from_problem(p) for p in invalid)
            continue
        try:
            write_task_dir(item, out)
        except OSError as exc:
            report.errors.append(TaskLoadError(item.id, "(write)", f"cannot write task: {exc}", source=source))
            continue
        folders[name] = item.id
        report.written += 1
    return report


def export_tasks(tasks: Iterable[Task], parquet: Path) -> int:
    """Write ``tasks`` to one parquet file in the current VTB schema; returns the row count."""
    return write_parquet(tasks, parquet)
