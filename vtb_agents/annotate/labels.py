"""The labels file of ``vtb annotate``: JSON lines that ``vtb analyze alignment --labels`` reads.

One line per rubric: ``{"task_id", "turn" (1-based), "rubric_id", "label": "met" | "not_met",
"note"}`` (the alignment reader ignores ``note``). A click replaces that rubric's line: the file is
rewritten whole through a temporary file and a rename (fsynced), so a crash leaves either the old
or the new file, and the file never holds a rubric twice (the alignment reader refuses that).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from vtb_agents.analysis.alignment import LABELS, read_labels

LABELS_FILE = "human_labels.jsonl"

Key = tuple[str, int, str]


class LabelStore:
    """The labels of one file, by (task id, 1-based turn, rubric id); thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._labels: dict[Key, dict[str, Any]] = {}
        if self.path.exists():
            read_labels(self.path)  # a file that alignment would refuse is refused here too
            for raw in self.path.read_text(encoding="utf-8").splitlines():
                if raw.strip():
                    row = json.loads(raw)
                    if row.get("turn") is None:
                        raise ValueError(f"{self.path}: labels without 'turn' were not written by vtb annotate")
                    self._labels[(row["task_id"], row["turn"], row["rubric_id"])] = row

    def rows(self) -> list[dict[str, Any]]:
        """Every label line, in the order first labelled."""
        with self._lock:
            return list(self._labels.values())

    def set(self, task_id: str, turn: int, rubric_id: str, label: str, note: str = "") -> dict[str, Any]:
        """Record (or replace) one rubric's label and note, durably, and return the line."""
        if label not in LABELS:
            raise ValueError(f"label must be 'met' or 'not_met', not {label!r}")
        row = {"task_id": task_id, "turn": turn, "rubric_id": rubric_id, "label": label, "note": note}
        with self._lock:
            self._labels[(task_id, turn, rubric_id)] = row
            self._write()
        return row

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in self._labels.values())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
