"""The results store of a run directory: ``results.jsonl``, one task per line, flushed as tasks finish.

A crash can at worst leave a partial last line; :meth:`ResultsStore.load` reports it and
:meth:`ResultsStore.repair` cuts it off so that the task is simply run again on resume.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from vtb_agents.results import TaskResult

RESULTS_FILE = "results.jsonl"


class ResultsError(ValueError):
    """A results file that cannot be read back (names the file and line)."""


class ResultsStore:
    """Append-only JSON-lines store of :class:`TaskResult`."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RESULTS_FILE

    def append(self, result: TaskResult) -> None:
        """Write one result and make it durable before returning."""
        line = result.model_dump_json() + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def load(self) -> tuple[list[TaskResult], int | None]:
        """All complete results, and the byte offset of a partial last line (None if there is none).

        A malformed line anywhere but at the end is an error: it is not what a crash leaves.
        """
        if not self.path.exists():
            return [], None
        data = self.path.read_bytes()
        results: list[TaskResult] = []
        offset = 0
        for number, raw in enumerate(data.splitlines(keepends=True), start=1):
            is_last = offset + len(raw) == len(data)
            try:
                results.append(TaskResult.model_validate_json(raw))
            except (ValidationError, ValueError) as exc:
                if is_last and not raw.endswith(b"\n"):
                    return results, offset
                raise ResultsError(f"{self.path}: line {number} is not a valid result: {exc}") from None
            offset += len(raw)
        return results, None

    def repair(self, offset: int) -> None:
        """Cut a partial last line at ``offset`` (what an interrupted append leaves)."""
        with self.path.open("r+b") as handle:
            handle.truncate(offset)
            handle.flush()
            os.fsync(handle.fileno())


def write_json_atomic(path: Path, data: object) -> None:
    """Write ``data`` as indented JSON to ``path`` via a temporary file and rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
