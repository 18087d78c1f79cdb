"""Remove a sandbox folder whatever model-written code left in it, within a time bound.

Why: a sandbox's working directory holds what the code wrote, and the code is hostile. In
``shutil.rmtree`` about 1,200 nested folders raise ``RecursionError``, a path past ``PATH_MAX``
``ENAMETOOLONG``, a folder of mode 000 ``PermissionError`` (for a host user without
``CAP_DAC_OVERRIDE``). Removal here walks with :func:`~.walk.walk_tree` (any depth, one open folder
at a time), gives folders ``u+rwx`` as it goes, unlinks FIFOs, sockets and devices like files
(never opening them), and gives up after a deadline (a tree of a million entries must not hold a
run up), so that the caller logs what is left and a later leftover sweep tries again.

Used by the sandbox's ``close()``, the quota's removal of what a call wrote and the sweep of
folders killed runs left (``leftovers.py``).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from .walk import Visit, walk_tree

REMOVAL_TIMEOUT_S = 60.0
"""How long removing one sandbox folder may take before it gives up (and a later sweep retries)."""
_PROBLEMS_SHOWN = 3
_log = logging.getLogger(__name__)


class RemovalError(OSError):
    """A folder that could not be removed completely; what is left stays where it was."""


def remove_entries(root: Path, chosen: Callable[[Visit], bool], timeout_s: float = REMOVAL_TIMEOUT_S) -> None:
    """Remove the entries under ``root`` that ``chosen`` picks (a folder once it has been emptied).

    ``chosen`` sees each entry's "entry" visit and each folder's "left" visit; a chosen folder is
    removed when left, so its contents must be chosen too. Raises :class:`RemovalError` naming
    what could not be removed (after trying everything else) or when ``timeout_s`` runs out.
    """
    deadline = time.monotonic() + timeout_s
    problems: list[str] = []
    for visit in walk_tree(root, repair=True):
        if time.monotonic() >= deadline:
            raise RemovalError(f"gave up removing {root} after {timeout_s:g} s "
                               f"(stopped at {_shown(visit.relative)})")
        if visit.kind == "unreadable":
            problems.append(f"{_shown(visit.relative)}: {visit.error}")
            continue
        is_dir = stat.S_ISDIR(visit.info.st_mode)
        if (visit.kind == "entry" and is_dir) or not chosen(visit):
            continue
        try:
            if is_dir:
                os.rmdir(visit.name, dir_fd=visit.dir_fd)
            else:
                os.unlink(visit.name, dir_fd=visit.dir_fd)
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"{_shown(visit.relative)}: {exc.strerror or exc}")
    if problems:
        more = f" and {len(problems) - _PROBLEMS_SHOWN} more" if len(problems) > _PROBLEMS_SHOWN else ""
        raise RemovalError(f"could not remove all of {root}: {'; '.join(problems[:_PROBLEMS_SHOWN])}{more}")


def remove_tree(root: Path, timeout_s: float = REMOVAL_TIMEOUT_S) -> None:
    """Remove folder ``root`` and everything in it (see the module docstring). Raises
    :class:`RemovalError` when something is left, ``FileNotFoundError`` when ``root`` is missing or
    was removed meanwhile by someone else (two sweeps at once)."""
    if not stat.S_ISDIR(os.lstat(root).st_mode):
        os.unlink(root)
        return
    remove_entries(root, lambda visit: True, timeout_s)
    os.rmdir(root)


def discard_tree(root: Path, what: str, timeout_s: float = REMOVAL_TIMEOUT_S) -> bool:
    """:func:`remove_tree`, logging a warning instead of raising: for teardown, where what the code
    left must never fail the task. ``what`` names the folder in the warning. True if removed."""
    try:
        remove_tree(root, timeout_s)
    except FileNotFoundError:
        return True
    except OSError as exc:
        _log.warning("could not remove %s %s: %s", what, root, exc)
        return False
    return True


def _shown(relative: str) -> str:
    """A relative name for a message: very long ones (past ``PATH_MAX``) cut in the middle."""
    return relative if len(relative) <= 200 else f"{relative[:80]}...[{len(relative) - 160} chars]...{relative[-80:]}"
