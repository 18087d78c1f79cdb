"""The results store of a run directory: ``results.jsonl``, one episode per line, flushed as tasks finish.

An append that fails (disk full) is cut back to the last complete line, so a failed write never
leaves half a record. A crash can still leave a partial last line, and a results file written by
an older version may hold a torn line in the middle: :meth:`ResultsStore.load_for_resume` moves
such bytes to ``results.jsonl.corrupt`` (never silently dropped) and keeps every whole record, so
the affected task simply runs again. A line is one episode: a task id and its
``epoch`` (1..K with ``vtb run --epochs K``; 1 otherwise), and (task id, epoch) is the key. A
result can be superseded: ``vtb run --resume --retry-errors`` appends a new line for an episode an
infrastructure failure left ungraded, and that later line replaces it (:func:`latest_results`), so
the file stays append-only. Any other second line for an episode (what two writers on one directory
would leave) is ignored, and loading says so: the first record of each (task id, epoch) is kept.
The JSON lines are the only record (no index beside them: a run's readers load the whole file, see
:mod:`vtb_agents.rundir.read`).

Each line begins with its format version (``{"format_version": 1, "task_id": ...``,
:data:`~vtb_agents.results.RESULTS_FORMAT`): a version on every line, not a header, so that an append
stays one self-contained ``write`` and a file never depends on a first line a crash could tear. Every
read (:meth:`ResultsStore.load`, :meth:`ResultsStore.task_ids`, :meth:`ResultsStore.load_for_resume`)
refuses the file at its first whole line of another version (or of none: written before versions),
before it parses or repairs anything (:class:`~vtb_agents.rundir.errors.FormatVersionError`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path

from pydantic import ValidationError

from vtb_agents.results import RESULTS_FORMAT, TaskResult
from vtb_agents.rundir.errors import check_format, format_version
from vtb_agents.rundir.layout import CORRUPT_SUFFIX, RESULTS_FILE

_RECORD_START = b'{"format_version":%d,"task_id":' % RESULTS_FORMAT
"""How a line this vtb writes begins (``TaskResult.model_dump_json``: its first two fields)."""
_ID_AT_START = re.compile(rb'\{\s*"format_version"\s*:\s*-?\d+\s*,\s*"task_id"\s*:\s*')
"""A line's start up to its task id, however the JSON is spaced (the version is checked apart)."""
_log = logging.getLogger(__name__)
APPENDING = threading.Lock()
"""Held while a line is being appended to any results file of this process: a process that must end
at once (a second Ctrl-C, ``cli/interrupt.py``) takes it first, so it never leaves half a line."""


class ResultsError(ValueError):
    """A results file that cannot be read back (names the file and line)."""


class StorageError(OSError):
    """A result that could not be written (disk full, read-only, I/O error); nothing half-written stays."""


class ResultsStore:
    """Append-only JSON-lines store of :class:`TaskResult`."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RESULTS_FILE

    def append(self, result: TaskResult) -> None:
        """Write one result and make it durable before returning.

        A failed write (disk full...) is cut back to where the line began and raised as
        :class:`StorageError`.
        """
        self._append_line((result.model_dump_json() + "\n").encode())

    def _append_line(self, line: bytes) -> None:
        with APPENDING:
            self._append_locked(line)

    def _append_locked(self, line: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as exc:
                note = ""
                try:
                    os.ftruncate(fd, start)
                except OSError as cut:
                    note = f"; the partial line could not be cut ({cut.strerror}): resuming repairs it"
                raise StorageError(exc.errno, f"{exc.strerror}{note}", str(self.path)) from exc
        finally:
            os.close(fd)

    def rewrite(self, results: list[TaskResult]) -> None:
        """Replace every line with ``results`` atomically (a crash leaves the old file whole)."""
        _write_atomic(self.path, b"".join((r.model_dump_json() + "\n").encode() for r in results))

    def load(self) -> tuple[list[TaskResult], int | None]:
        """The complete result of each task (see :func:`latest_results`), and the byte offset of a
        partial last line (None if there is none).

        A malformed line anywhere but at the end is a :class:`ResultsError` saying that resuming
        the run repairs it.
        """
        if not self.path.exists():
            return [], None
        data = self.path.read_bytes()
        results: list[TaskResult] = []
        offset = 0
        lines = data.splitlines(keepends=True)
        self._check_format(lines)
        for number, raw in enumerate(lines, start=1):
            is_last = offset + len(raw) == len(data)
            try:
                results.append(TaskResult.model_validate_json(raw))
            except (ValidationError, ValueError) as exc:
                if is_last and not raw.endswith(b"\n"):
                    return latest_results(results, source=self.path), offset
                raise ResultsError(f"{self.path}: line {number} is not a valid result ({exc.__class__.__name__}); "
                                   "`vtb run --resume` with the run's options repairs the file") from None
            offset += len(raw)
        return latest_results(results, source=self.path), None

    def task_ids(self) -> set[str]:
        """The task ids of the file's complete records, read from each line's start without parsing the
        rest (so that comparing large runs stays quick)."""
        if not self.path.exists():
            return set()
        decoder = json.JSONDecoder()
        ids: set[str] = set()
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                self._check_line(number, raw)
                start = _ID_AT_START.match(raw)
                if start is None or not raw.endswith(b"\n"):
                    continue  # a partial or torn line is no complete record (load() and resume report it)
                try:
                    value, _ = decoder.raw_decode(raw[start.end():].decode())
                except ValueError:
                    continue  # torn inside the id: likewise
                ids.add(str(value))
        return ids

    def load_for_resume(self) -> list[TaskResult]:
        """The complete results, after repairing the file: a partial last line or a torn line in
        the middle (what a failed write or a crash leaves) is moved to ``results.jsonl.corrupt``
        and the file rewritten with every whole record (a record glued after torn bytes is kept)."""
        if not self.path.exists():
            return []
        lines = self.path.read_bytes().splitlines(keepends=True)
        self._check_format(lines)  # before any repair: a file of another version stays as it is
        records: list[bytes] = []
        torn: list[bytes] = []
        for raw in lines:
            record, junk = _split_torn(raw)
            records += [record] if record is not None else []
            torn += [junk] if junk else []
        if torn:
            corrupt = self.path.with_name(self.path.name + CORRUPT_SUFFIX)
            with corrupt.open("ab") as handle:
                handle.writelines(junk if junk.endswith(b"\n") else junk + b"\n" for junk in torn)
                handle.flush()
                os.fsync(handle.fileno())
            _write_atomic(self.path, b"".join(records))  # each ends with its newline (see _valid)
            _log.warning("%s: %d torn line(s) moved to %s; their tasks run again", self.path, len(torn), corrupt)
        results, _ = self.load()
        return results


    def _check_format(self, lines: list[bytes]) -> None:
        """Refuse the file at its first whole line of another format version (see :meth:`_check_line`)."""
        for number, raw in enumerate(lines, start=1):
            self._check_line(number, raw)

    def _check_line(self, number: int, raw: bytes) -> None:
        """Refuse line ``number`` if it is of another format version: one that begins with another
        ``format_version``, or a whole JSON object without one (written before versions). Torn bytes
        have no version to check: loading and resuming deal with them."""
        try:
            found = format_version(raw)
        except ValueError:
            return
        check_format(f"{self.path} (line {number})", found, RESULTS_FORMAT)


def latest_results(results: list[TaskResult], *, source: Path | str) -> list[TaskResult]:
    """One result per episode, keyed by (task id, epoch), in the order first written: the first
    record, unless a later one retries it after an infrastructure failure (``--retry-errors``),
    which then replaces it. Other duplicates are ignored with a warning naming ``source``."""
    kept: dict[tuple[str, int], TaskResult] = {}
    ignored: list[str] = []
    for result in results:
        key = episode_key(result)
        first = kept.get(key)
        if first is None or first.infrastructure_failed:
            kept[key] = result
        else:
            ignored.append(result.task_id if result.epoch == 1 else f"{result.task_id} (epoch {result.epoch})")
    if ignored:
        _log.warning("%s: %d duplicate line(s) for task(s) %s ignored (the first record of each is used)",
                     source, len(ignored), ", ".join(sorted(set(ignored))[:10]))
    return list(kept.values())


def episode_key(result: TaskResult) -> tuple[str, int]:
    """What identifies one result of a run: its task id and epoch (a run writes each once, or again
    only to retry an infrastructure failure)."""
    return result.task_id, result.epoch


def _split_torn(raw: bytes) -> tuple[bytes | None, bytes]:
    """(whole record or None, torn bytes) of one line: a valid line is all record; otherwise the
    longest valid record at its end (glued on after a partial write) is recovered if there is one."""
    if _valid(raw):
        return raw, b""
    start = raw.find(_RECORD_START)
    while start != -1:
        if _valid(raw[start:]):
            return raw[start:], raw[:start]
        start = raw.find(_RECORD_START, start + len(_RECORD_START))  # occurrences cannot overlap
    return None, raw


def _valid(raw: bytes) -> bool:
    if not raw.endswith(b"\n"):
        return False
    try:
        TaskResult.model_validate_json(raw)
    except (ValidationError, ValueError):
        return False
    return True


def write_json_atomic(path: Path, data: object) -> None:
    """Write ``data`` as indented UTF-8 JSON to ``path``, atomically (see :func:`_write_atomic`)."""
    _write_atomic(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` via a temporary file beside it, synced, then renamed: a crash
    leaves the old file whole, and a failed write (a full disk) removes the temporary file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
