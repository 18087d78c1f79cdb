"""One SQLite file shared by the threads of a process and by other processes: the judge's verdict
cache and the model-call cache keep their rows in one.

Why one helper: both caches are written by up to N task threads at once and, under the Ray
executor, by several worker processes on the same file. The file runs in WAL mode (readers never
wait for a writer, a crash loses at most the transaction being written: each write commits on its
own), a writer that finds the file locked waits up to ``busy_timeout_s`` instead of failing, and
one connection per process is used by every thread behind a lock (``check_same_thread=False``).
Opening waits too: connections that turn a new file to WAL at the same moment (the runs of
``vtb run --model A --model B`` opening one verdict cache) can find it locked at once, where SQLite
gives up without waiting (two readers that both want to write), so the opening is tried again until
``busy_timeout_s`` has passed.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Sequence

__all__ = ["SharedSqlite"]

OPEN_RETRY_S = 0.02
"""The wait before opening a file found locked again."""


class SharedSqlite:
    """A SQLite file opened for shared use; ``schema`` statements (``CREATE TABLE IF NOT EXISTS``) run on open."""

    def __init__(self, path: Path, schema: Sequence[str], busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=busy_timeout_s)
        gives_up = time.monotonic() + busy_timeout_s
        while True:
            try:
                with self._lock, self._db:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    for statement in schema:
                        self._db.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if "database is locked" not in str(exc) or time.monotonic() >= gives_up:
                    self._db.close()
                    raise
            time.sleep(OPEN_RETRY_S)

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row ``sql`` selects (None if none)."""
        with self._lock:
            row: tuple[Any, ...] | None = self._db.execute(sql, tuple(params)).fetchone()
        return row

    def write(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one writing statement in its own committed transaction."""
        self.write_all([(sql, params)])

    def write_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run writing statements (SQL, parameters) in one committed transaction: all or none."""
        with self._lock, self._db:
            for sql, params in statements:
                self._db.execute(sql, tuple(params))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
