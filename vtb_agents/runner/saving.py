"""Saving a run's results as they come, and stopping cleanly when the disk cannot take more.

Why: a full disk (or a read-only or failing one) must not corrupt what is saved, nor let the run
go on starting tasks (and paying for model calls) whose results it can no longer save. The
first storage error sets the run's ``stop`` event: no new task starts, running ones finish and
their results are kept in memory, written at the end if space has come back. The run then ends
with one line: ``cannot write results: disk full (...)`` and how to resume.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from vtb_agents.models.cache import ModelCacheMiss
from vtb_agents.results import TaskResult
from vtb_agents.rundir.store import ResultsStore, StorageError

STORAGE_ERRNOS = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file too large",
                  errno.EROFS: "read-only file system", errno.EIO: "I/O error"}
"""Errors of the disk itself (not of one bad file), with the words the message uses."""
_SQLITE_ERRORS = {"database or disk is full": errno.ENOSPC, "disk i/o error": errno.EIO}
T = TypeVar("T")


def storage_cause(exc: BaseException) -> OSError | None:
    """The disk error behind ``exc`` (itself, its cause or context), or None if it is not one.
    SQLite's "database or disk is full" counts as ENOSPC, its "disk I/O error" as EIO."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in STORAGE_ERRNOS:
            return current
        if isinstance(current, sqlite3.OperationalError) and str(current).lower() in _SQLITE_ERRORS:
            return OSError(_SQLITE_ERRORS[str(current).lower()], f"SQLite: {current}")
        current = current.__cause__ or current.__context__
    return None


def storage_message(error: OSError, out: Path, saved: int, unsaved: int) -> str:
    """The one line a run ends with after a storage error."""
    what = STORAGE_ERRNOS.get(error.errno or 0, "storage error")
    if error.errno == errno.EIO and _no_space_left(out):  # SQLite says "I/O error" when the disk is full
        what = "disk full"
    lost = f"; {unsaved} finished task(s) could not be saved and will run again" if unsaved else ""
    return (f"cannot write results: {what} ({error.strerror or error}) in {out}; {saved} task(s) saved{lost}; "
            "free space and continue the run with --resume")


def _no_space_left(folder: Path) -> bool:
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


class ResultSaver:
    """The run's result sink: appends to ``store``; after a storage error, stops the run and keeps
    results in memory. ``on_saved`` is called with each saved result."""

    def __init__(self, store: ResultsStore, stop: threading.Event,
                 on_saved: Callable[[TaskResult], None]) -> None:
        self.store, self.stop, self.on_saved = store, stop, on_saved
        self.error: OSError | None = None
        self.unsaved: list[TaskResult] = []
        self.saved = 0

    def __call__(self, result: TaskResult) -> None:
        """Save ``result`` (or keep it in memory once the disk has failed)."""
        if self.error is None:
            try:
                self.store.append(result)
            except StorageError as exc:
                self.failed(exc)
            else:
                self.saved += 1
                self.on_saved(result)
                return
        self.unsaved.append(result)

    def failed(self, error: OSError) -> None:
        """Record the first storage error and stop scheduling tasks."""
        self.error = self.error or error
        self.stop.set()

    def guard(self, work: Callable[[T], TaskResult]) -> Callable[[T], TaskResult]:
        """``work`` that stops the run when it fails on the disk or misses a cache-only model cache (the
        error still propagates): no new task starts, running ones finish and are saved."""
        def guarded(item: T) -> TaskResult:
            try:
                return work(item)
            except Exception as exc:
                if (cause := storage_cause(exc)) is not None:
                    self.failed(cause)
                elif isinstance(exc, ModelCacheMiss):
                    self.stop.set()
                raise
        return guarded

    def finish(self, out: Path, already: int = 0) -> str | None:
        """After the executor: retry the results kept in memory; the one-line failure message if
        anything went wrong with the disk, else None. ``already``: results saved before this run."""
        if self.error is None:
            return None
        pending, self.unsaved = self.unsaved, []
        for index, result in enumerate(pending):
            try:
                self.store.append(result)
            except StorageError:
                self.unsaved = pending[index:]
                break
            self.saved += 1
            self.on_saved(result)
        return storage_message(self.error, out, already + self.saved, len(self.unsaved))
