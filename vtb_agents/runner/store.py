"""The results store of a run directory: ``results.jsonl``, one task per line, flushed as tasks finish,
and ``results.sqlite``, an index of it (task id, line, outcome) for queries over large runs.

A task's result can be superseded: ``vtb run --resume --retry-errors`` appends a new line for a task
an infrastructure failure left ungraded, and every reader takes the last line per task id
(:func:`latest_results`), so the file stays append-only. A crash can at worst leave a partial last line; :meth:`ResultsStore.load` reports it and
:meth:`ResultsStore.repair` cuts it off so that the task is simply run again on resume. The JSON
lines are the record; the index is derived, and rebuilt from them whenever it is out of step.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from pydantic import ValidationError

from vtb_agents.results import TaskResult

RESULTS_FILE = "results.jsonl"
INDEX_FILE = "results.sqlite"


class ResultsError(ValueError):
    """A results file that cannot be read back (names the file and line)."""


class ResultsIndex:
    """SQLite index of ``results.jsonl``: one row per task with its line number and outcome."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")  # derived data: rebuilt from the JSON lines if lost
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS results (task_id TEXT PRIMARY KEY, line INTEGER NOT NULL, "
                             "category TEXT, domain TEXT, turncase TEXT, graded INTEGER, passed INTEGER, "
                             "score REAL, episode_status TEXT, duration_s REAL)")

    def add(self, result: TaskResult, line: int) -> None:
        """Index ``result``, found at 1-based ``line`` of the JSON lines."""
        grade = result.grade
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (
                result.task_id, line, result.category, result.domain, result.turncase, int(grade.graded),
                None if grade.passed is None else int(grade.passed), grade.score, result.episode.status,
                result.duration_s))

    def count(self) -> int:
        """How many tasks are indexed."""
        return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def rebuild(self, numbered: list[tuple[int, TaskResult]]) -> None:
        """Index exactly ``numbered`` ((line, result) pairs of the JSON file, in order; later lines win)."""
        with self._db:
            self._db.execute("DELETE FROM results")
        for line, result in numbered:
            self.add(result, line)

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Rows of a read-only query over the ``results`` table."""
        return self._db.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close the database."""
        self._db.close()


class ResultsStore:
    """Append-only JSON-lines store of :class:`TaskResult`, with its SQLite index."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RESULTS_FILE
        self.index_path = Path(run_dir) / INDEX_FILE
        self._lines = 0
        self._index: ResultsIndex | None = None

    def append(self, result: TaskResult) -> None:
        """Write one result and make it durable before returning, then index it."""
        line = result.model_dump_json() + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if self._index is None:  # first append of this store: count the lines already there
            with self.path.open("rb") as handle:
                self._lines = sum(1 for _ in handle)
            self._index = ResultsIndex(self.index_path)
        else:
            self._lines += 1
        self._index.add(result, self._lines)

    def rewrite(self, results: list[TaskResult]) -> None:
        """Replace every line with ``results`` atomically (a crash leaves the old file whole)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.writelines(r.model_dump_json() + "\n" for r in results)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        self.index_path.unlink(missing_ok=True)  # derived from the old lines: rebuilt on next use

    def index(self) -> ResultsIndex:
        """The index, rebuilt from the JSON lines first if it is out of step (say, after a crash)."""
        numbered, _ = self._read()
        index = ResultsIndex(self.index_path)
        if index.count() != len({result.task_id for _, result in numbered}):
            index.rebuild(numbered)
        return index

    def load(self) -> tuple[list[TaskResult], int | None]:
        """The latest complete result of each task (see :func:`latest_results`), and the byte offset
        of a partial last line (None if there is none).

        A malformed line anywhere but at the end is an error: it is not what a crash leaves.
        """
        numbered, partial_at = self._read()
        return latest_results([result for _, result in numbered]), partial_at

    def _read(self) -> tuple[list[tuple[int, TaskResult]], int | None]:
        """Every complete line as (line number, result), and the offset of a partial last line."""
        if not self.path.exists():
            return [], None
        data = self.path.read_bytes()
        results: list[tuple[int, TaskResult]] = []
        offset = 0
        for number, raw in enumerate(data.splitlines(keepends=True), start=1):
            is_last = offset + len(raw) == len(data)
            try:
                results.append((number, TaskResult.model_validate_json(raw)))
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


def latest_results(results: list[TaskResult]) -> list[TaskResult]:
    """The last result of each task id, in the order those last results were written."""
    last = {result.task_id: index for index, result in enumerate(results)}
    return [result for index, result in enumerate(results) if last[result.task_id] == index]


def write_json_atomic(path: Path, data: object) -> None:
    """Write ``data`` as indented JSON to ``path`` via a temporary file and rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
