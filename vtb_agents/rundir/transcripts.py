"""The one reader and writer of task transcripts in a run directory (``transcripts/``).

A task's transcript (:class:`~vtb_agents.transcript.Transcript`) is written once, atomically,
when the task ends and before its line in ``results.jsonl``: a crash leaves either the whole
file or none, a task re-run after a crash replaces its own file (never a second copy), and a
resumed run leaves the files of finished tasks as they are. One file per task and epoch, named
by :func:`~vtb_agents.rundir.layout.transcript_file`; images are ``{"sha256"}`` references
into ``artifacts/``, never inlined. Every read checks the file's ``format_version``
(:data:`~vtb_agents.transcript.TRANSCRIPT_FORMAT`) first: a transcript of another version is refused
(:class:`~vtb_agents.rundir.errors.FormatVersionError`), never read or rewritten.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import ValidationError

from vtb_agents.rundir.errors import RunError, check_format, format_version
from vtb_agents.rundir.layout import transcript_file
from vtb_agents.rundir.read import read_record
from vtb_agents.rundir.store import ResultsStore, write_json_atomic
from vtb_agents.transcript import TRANSCRIPT_FORMAT, JudgeEvent, Transcript

__all__ = ["find_transcript", "open_transcript", "read_transcript", "regraded_transcript", "write_transcript"]


def write_transcript(run_dir: Path, transcript: Transcript, epoch: int = 1) -> Path:
    """Write ``transcript`` (of one task and ``epoch``) atomically into ``run_dir``; return its path."""
    path = transcript_file(run_dir, transcript.task_id, epoch)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, transcript.model_dump(mode="json"))
    return path


def read_transcript(run_dir: Path, task_id: str, epoch: int = 1) -> Transcript:
    """The transcript of ``task_id`` (and ``epoch``) in ``run_dir``; a missing or unreadable file, or
    one of another format version, is a :class:`~vtb_agents.rundir.errors.RunError` naming it."""
    path = transcript_file(run_dir, task_id, epoch)
    try:
        raw = path.read_bytes()
        found = format_version(raw)
    except FileNotFoundError:
        raise RunError(f"{path}: no transcript of task {task_id!r} (epoch {epoch}) in {run_dir}") from None
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not a readable transcript: {exc}") from None
    check_format(path, found, TRANSCRIPT_FORMAT)
    try:
        transcript = Transcript.model_validate_json(raw)
    except (ValidationError, ValueError) as exc:
        raise RunError(f"{path}: not a readable transcript: {exc}") from None
    if transcript.task_id != task_id:
        raise RunError(f"{path}: holds the transcript of task {transcript.task_id!r}, not {task_id!r}")
    return transcript


def find_transcript(run_dir: Path, task_id: str, epoch: int = 1) -> Transcript | None:
    """The transcript of ``task_id`` (and ``epoch``), None when the run has none for it (a run written
    before transcripts); an unreadable file is a :class:`~vtb_agents.rundir.errors.RunError`."""
    if not transcript_file(run_dir, task_id, epoch).exists():
        return None
    return read_transcript(run_dir, task_id, epoch)


def regraded_transcript(run_dir: Path, task_id: str, verdicts: list[JudgeEvent], epoch: int = 1) -> Path | None:
    """Replace the judge events of ``task_id``'s transcript with ``verdicts`` (a regrade); the
    episode's events stay. None when the task has no transcript (a run written before them)."""
    if not transcript_file(run_dir, task_id, epoch).exists():
        return None
    kept = [event for event in read_transcript(run_dir, task_id, epoch).events if event.kind != "judge"]
    return write_transcript(run_dir, Transcript(task_id=task_id, events=[*kept, *verdicts]), epoch)


def open_transcript(run_dir: Path, task_id: str, epoch: int = 1) -> Transcript:
    """The transcript ``vtb transcript`` shows, with errors a user can act on: a folder that is not a
    run directory, a task id the run does not have (naming the closest ids it has), or a task
    without a transcript (still running, or a run written before transcripts)."""
    read_record(run_dir)  # no such folder / not a run directory / another format: a RunError naming it
    ids = ResultsStore(run_dir).task_ids()  # results.jsonl of another format: likewise
    if transcript_file(run_dir, task_id, epoch).exists():
        return read_transcript(run_dir, task_id, epoch)
    if task_id not in ids:
        close = difflib.get_close_matches(task_id, sorted(ids), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else (
            f"; it has {len(ids)} task(s), e.g. {', '.join(repr(i) for i in sorted(ids)[:3])}" if ids else
            "; it has no finished task yet")
        raise RunError(f"task {task_id!r} is not in run {run_dir}{hint}")
    raise RunError(f"task {task_id!r} of run {run_dir} has no transcript for epoch {epoch} "
                   f"({transcript_file(run_dir, task_id, epoch).name} is missing: the run was written before "
                   "transcripts were kept, or with other epochs)")
