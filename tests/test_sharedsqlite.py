"""One SQLite file opened at once by many connections (the runs of ``vtb run --model A --model B`` open one
verdict cache at the same moment): every opening succeeds, none fails with "database is locked"."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from vtb_agents.sharedsqlite import SharedSqlite

SCHEMA = ["CREATE TABLE IF NOT EXISTS rows (key TEXT PRIMARY KEY, value TEXT)"]


def open_at_once(path: Path, count: int) -> list[BaseException]:
    """Open ``path`` from ``count`` threads released together, write a row from each; what they raised."""
    barrier, errors = threading.Barrier(count), []

    def one(number: int) -> None:
        barrier.wait()
        try:
            db = SharedSqlite(path, SCHEMA)
            db.write("INSERT INTO rows VALUES (?, ?)", (str(number), "x"))
            db.close()
        except BaseException as exc:  # collected: the test names them
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_many_connections_turning_a_new_file_to_wal_at_once_all_open_it(tmp_path: Path) -> None:
    # Before the retry, about one round in twenty had an opening fail at once with "database is locked"
    # (SQLite does not wait when two connections that both read want to write).
    for round_ in range(150):
        path = tmp_path / f"cache-{round_}.sqlite"
        errors = open_at_once(path, 8)
        assert errors == [], f"round {round_}: {errors}"
        db = SharedSqlite(path, SCHEMA)
        assert db.one("SELECT COUNT(*) FROM rows") == (8,)
        assert db.one("PRAGMA journal_mode") == ("wal",)
        db.close()


def test_an_error_other_than_a_lock_is_raised_at_once(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError, match="incomplete input"):
        SharedSqlite(tmp_path / "bad.sqlite", ["CREATE TABLE rows ("], busy_timeout_s=60)
