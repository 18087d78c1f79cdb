"""The errors of a run directory that cannot be created, continued or read as asked."""

from __future__ import annotations

import json
import re
from pathlib import Path

from vtb_agents.version import __version__

_VERSION_AT_START = re.compile(rb'\s*\{\s*"format_version"\s*:\s*(-?\d+)\s*[,}]')


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (names the run directory and the reason)."""


class StoppedRun(RunError):
    """A run that stopped partway for a reason outside it (a full disk, say): what is saved stays,
    and ``--resume`` with the run's own options continues it (the CLI prints that command)."""


class FormatVersionError(RunError):
    """A run file (``run.json``, a line of ``results.jsonl``, a transcript) of another format version
    than this vtb reads: refused as it is, never upgraded (docs/concepts/run-directory.md)."""


def check_format(path: Path | str, found: object, reads: int) -> None:
    """Refuse the file at ``path`` (or a line of it) unless its format version ``found`` is ``reads``
    (the version this vtb reads and writes): a :class:`FormatVersionError` on one line, naming the file,
    both versions and what to do. Called by every reader before anything else is read or changed."""
    if type(found) is int and found == reads:  # not True, not 1.0: a version is written as an integer
        return
    written = "none (written before format versions)" if found is None else repr(found)
    raise FormatVersionError(
        f"{path}: format version {written}, but vtb-agents {__version__} reads version {reads}: re-run it with "
        "this version, or read it with the vtb-agents version that wrote it")


def format_version(raw: bytes) -> object:
    """The ``format_version`` of a JSON object's bytes: read from its start when it comes first (as this
    vtb writes it, so that a line or file need not be parsed whole), else from the parsed object (None
    when it has none). Bytes that are no JSON raise ``ValueError``."""
    match = _VERSION_AT_START.match(raw)
    if match is not None:
        return int(match[1])
    value = json.loads(raw)
    return value.get("format_version") if isinstance(value, dict) else None
