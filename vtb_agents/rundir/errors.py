"""The error of a run directory that cannot be created, continued or read as asked."""

from __future__ import annotations


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (names the run directory and the reason)."""
