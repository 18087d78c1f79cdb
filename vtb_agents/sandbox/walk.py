"""Walk a working directory of any depth with one open folder at a time, never through a symlink.

Why: model-written code decides what its working directory holds, and the host must still scan
and remove it. ``os.walk``/``os.fwalk`` and ``shutil.rmtree`` recurse in Python (about 1,000 nested
folders raise ``RecursionError``), build full paths (past ``PATH_MAX`` the kernel answers
``ENAMETOOLONG``) or keep one file descriptor per level (``EMFILE``). :func:`walk_tree` goes down
with ``openat`` relative to the folder it is in and back up through ``..``, checking that ``..``
is the folder it came from (else it opens that folder again from the root, name by name), so
depth costs neither recursion, nor path length, nor descriptors.

With ``repair=True`` a folder the host may not enter or list (mode 000, say: the host may run as
a user without ``CAP_DAC_OVERRIDE``) gets ``u+rwx`` before it is opened, as its owner may do;
otherwise it is reported as unreadable and not entered.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWNER_RWX = stat.S_IRWXU

VisitKind = Literal["entry", "left", "unreadable"]


@dataclass(frozen=True)
class Visit:
    """One step of :func:`walk_tree`.

    ``kind``: "entry" for each entry found (a folder is entered right after), "left" for a folder
    whose contents were all visited, "unreadable" for a folder that could not be opened or listed
    (``error`` says why; it is not entered, and no "left" follows). ``dir_fd`` is the folder that
    holds the entry, valid until the next step; ``parts`` the entry's path under the root;
    ``info`` its ``lstat``.
    """

    kind: VisitKind
    dir_fd: int
    parts: tuple[str, ...]
    info: os.stat_result
    error: OSError | None = None

    @property
    def name(self) -> str:
        """The entry's name inside ``dir_fd``."""
        return self.parts[-1]

    @property
    def relative(self) -> str:
        """The entry's path under the root, ``/``-separated (it may be longer than ``PATH_MAX``)."""
        return "/".join(self.parts)


@dataclass
class _Frame:
    """A folder being listed: its path under the root, identity, and the entries left to visit."""

    parts: tuple[str, ...]
    ident: tuple[int, int]
    pending: list[str] = field(default_factory=list)


def _ident(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def make_enterable(name: str, dir_fd: int, info: os.stat_result) -> None:
    """Give folder ``name`` (found with ``lstat`` ``info`` in ``dir_fd``) ``u+rwx`` unless it has it.

    Changed through an ``O_PATH`` descriptor of the folder itself, so a folder swapped for a
    symlink meanwhile is never followed.
    """
    if info.st_mode & _OWNER_RWX == _OWNER_RWX:
        return
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(info.st_mode) | _OWNER_RWX)
    finally:
        os.close(fd)


def _list(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [entry.name for entry in entries]


def _open_from_root(root_fd: int, parts: tuple[str, ...], ident: tuple[int, int]) -> int:
    """The folder at ``parts`` opened again name by name from the root, if it is still ``ident``."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        if _ident(os.fstat(fd)) != ident:
            raise FileNotFoundError(errno.ENOENT, "the folder was replaced during the walk", "/".join(parts))
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


def _up(fd: int, root_fd: int, parent: _Frame) -> int:
    """The parent folder ``parent`` of the folder open as ``fd`` (through ``..``, checked)."""
    up = os.open("..", _DIR_FLAGS, dir_fd=fd)
    if _ident(os.fstat(up)) == parent.ident:
        return up
    os.close(up)  # the folder was moved while we were in it: find the parent by its names
    return _open_from_root(root_fd, parent.parts, parent.ident)


def _reopen_deepest(root_fd: int, stack: list[_Frame]) -> int:
    """Open the deepest folder of ``stack`` that is still where it was, dropping the others."""
    while len(stack) > 1:
        try:
            return _open_from_root(root_fd, stack[-1].parts, stack[-1].ident)
        except OSError:
            stack.pop()
    return os.dup(root_fd)


def walk_tree(root: Path, *, repair: bool = False) -> Iterator[Visit]:
    """Visit everything under ``root`` (not ``root`` itself), depth first (see :class:`Visit`).

    Never follows symlinks. Entries that vanish while we look are skipped; a folder moved away
    while we are inside it is not visited further. ``repair``: give folders
    that lack ``u+rwx`` that permission before entering them (``root`` included).
    """
    if repair:
        _repair_root(root)
    elif not readable(root):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(root))
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        yield from _walk(root_fd, repair)
    finally:
        os.close(root_fd)


def readable(folder: Path) -> bool:
    """Whether this process may list ``folder`` and look at what it holds (read and search)."""
    return os.access(folder, os.R_OK | os.X_OK, effective_ids=True)


def _repair_root(root: Path) -> None:
    """``make_enterable`` for ``root`` itself (code may chmod its own working directory)."""
    path = os.path.abspath(root)
    parent = os.open(os.path.dirname(path), _DIR_FLAGS)
    try:
        info = os.lstat(os.path.basename(path), dir_fd=parent)
        if stat.S_ISDIR(info.st_mode):
            make_enterable(os.path.basename(path), parent, info)
    finally:
        os.close(parent)


def _walk(root_fd: int, repair: bool) -> Iterator[Visit]:
    fd = os.dup(root_fd)
    stack = [_Frame((), _ident(os.fstat(fd)), _list(fd))]
    try:
        while stack:
            frame = stack[-1]
            if not frame.pending:  # this folder is done: go up and report it left
                stack.pop()
                if not stack:
                    break
                try:
                    parent_fd = _up(fd, root_fd, stack[-1])
                except OSError:  # moved away with its parent: go on from what is still there
                    os.close(fd)
                    fd = _reopen_deepest(root_fd, stack)
                    continue
                os.close(fd)
                fd = parent_fd
                try:
                    info = os.lstat(frame.parts[-1], dir_fd=fd)
                except FileNotFoundError:
                    continue
                yield Visit("left", fd, frame.parts, info)
                continue
            name = frame.pending.pop()
            parts = (*frame.parts, name)
            try:
                info = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            yield Visit("entry", fd, parts, info)
            if not stat.S_ISDIR(info.st_mode):
                continue
            try:
                if repair:
                    make_enterable(name, fd, info)
                if not os.access(name, os.R_OK | os.X_OK, dir_fd=fd, effective_ids=True, follow_symlinks=False):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/".join(parts))
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                yield Visit("unreadable", fd, parts, info, exc)
                continue
            try:
                listed = _list(child)
            except OSError as exc:
                os.close(child)
                yield Visit("unreadable", fd, parts, info, exc)
                continue
            os.close(fd)
            fd = child
            stack.append(_Frame(parts, _ident(os.fstat(fd)), listed))
    finally:
        os.close(fd)


def chown_tree(root: Path, from_uid: int, uid: int, gid: int) -> None:
    """Give ``root`` and everything under it owned by ``from_uid`` to ``uid``:``gid``.

    Any depth, never through a symlink (relative to open folders: race-free); entries of other
    owners are left alone, and folders that cannot be entered keep what they hold.
    """
    if os.lstat(root).st_uid == from_uid:
        os.chown(root, uid, gid, follow_symlinks=False)
    for visit in walk_tree(root):
        if visit.kind == "entry" and visit.info.st_uid == from_uid:
            os.chown(visit.name, uid, gid, dir_fd=visit.dir_fd, follow_symlinks=False)
