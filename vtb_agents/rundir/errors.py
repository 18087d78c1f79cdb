"""The error of a run directory that cannot be created, continued or read as asked."""

from __future__ import annotations


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (names the run directory and the reason)."""


class StoppedRun(RunError):
    """A run that stopped partway for a reason outside it (a full disk, say): what is saved stays,
    and ``--resume`` with the run's own options continues it (the CLI prints that command)."""
