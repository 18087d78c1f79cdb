"""Files named by untrusted data, opened strictly inside a folder.

Why: task files name their images (``images[i].file``) and model-written code names the files of a
sandbox's working directory; both are hostile inputs. A name must be a relative path without
``..``; it is opened one component at a time relative to the folder with ``O_NOFOLLOW``, so a
symlink anywhere on the way is refused (race-free: nothing is resolved by path), and anything but
a regular file at the end is refused before a byte is read (a FIFO would block the reader).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink"))


class UnsafePath(OSError, ValueError):
    """A file name that is not a plain relative name of a regular file inside its folder.

    ``reason`` is the short why ("absolute path", "symlink", ...), for messages naming the field.
    An ``OSError`` (callers reading files handle those already) and a ``ValueError`` (bad input).
    """

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"file name {name!r}: {reason}")


def relative_name(name: str) -> PurePosixPath:
    """``name`` as a path relative to a folder; :class:`UnsafePath` if it could leave it."""
    path = PurePosixPath(name)
    if not name or "\x00" in name:
        raise UnsafePath(name, "empty name" if not name else "NUL byte in name")
    if path.is_absolute():
        raise UnsafePath(name, "absolute path (must be relative, inside the folder)")
    if ".." in path.parts:
        raise UnsafePath(name, "'..' in path (must stay inside the folder)")
    if not path.parts or path.parts == (".",):
        raise UnsafePath(name, "names the folder itself, not a file")
    return path


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a symlink", ...)."""
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def _open_parent(root: Path, name: str, parts: tuple[str, ...], create: bool,
                 owner: tuple[int, int] | None) -> int:
    """An ``O_PATH`` fd of the folder holding ``parts[-1]``, walked without following symlinks."""
    dir_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if create and _mkdir_at(part, dir_fd) and owner:
                os.chown(part, *owner, dir_fd=dir_fd, follow_symlinks=False)
            fd = _open_part(name, part, dir_fd, os.O_PATH | os.O_DIRECTORY)
            os.close(dir_fd)
            dir_fd = fd
        result, dir_fd = dir_fd, -1
        return result
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)


def _open_part(name: str, part: str, dir_fd: int, flags: int) -> int:
    try:
        return os.open(part, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            try:
                mode = os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                raise exc from None
            if not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
                raise refusal(name, mode) from None
        raise


def refusal(name: str, mode: int) -> UnsafePath:
    """The error for ``name``, found to be of non-regular ``mode``."""
    if stat.S_ISLNK(mode):
        return UnsafePath(name, "symlink (links are refused: they can lead outside the folder)")
    return UnsafePath(name, f"{file_kind(mode)}, not a regular file")


def open_in_dir(root: Path, name: str, flags: int, owner: tuple[int, int] | None = None) -> int:
    """Open ``name`` under ``root`` one component at a time, never through a symlink.

    Race-free against code that swaps a directory for a symlink while the host works on the
    folder. ``os.O_CREAT`` in ``flags`` also creates missing parent directories, given to
    ``owner`` (uid, gid) when set. Symlinks and anything but a regular file at the end raise
    :class:`UnsafePath` (never blocking on a FIFO).
    """
    parts = relative_name(name).parts
    dir_fd = _open_parent(root, name, parts, bool(flags & os.O_CREAT), owner)
    fd = -1
    try:
        fd = _open_part(name, parts[-1], dir_fd, flags | os.O_NONBLOCK)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refusal(name, mode)
        if owner and flags & os.O_CREAT:
            os.fchown(fd, *owner)
        if not flags & os.O_PATH:
            os.set_blocking(fd, True)
        result, fd = fd, -1
        return result
    finally:
        os.close(dir_fd)
        if fd >= 0:
            os.close(fd)


def check_in_dir(root: Path, name: str) -> None:
    """Raise unless ``name`` is a regular file under ``root`` reached without symlinks
    (:class:`UnsafePath`; ``FileNotFoundError`` if it is missing). Opens nothing for reading."""
    os.close(open_in_dir(root, name, os.O_PATH))


def read_in_dir(root: Path, name: str) -> bytes:
    """The bytes of regular file ``name`` under ``root`` (see :func:`open_in_dir`)."""
    with os.fdopen(open_in_dir(root, name, os.O_RDONLY), "rb") as handle:
        return handle.read()


def write_in_dir(root: Path, name: str, data: bytes) -> None:
    """Write ``data`` to ``name`` under ``root`` atomically (temporary file, then rename), creating
    parent folders; never through a symlink, so nothing lands outside ``root``."""
    parts = relative_name(name).parts
    dir_fd = _open_parent(root, name, parts, True, None)
    tmp = f".{parts[-1]}.{os.getpid()}.tmp"
    try:
        fd = _open_part(name, tmp, dir_fd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(dir_fd)


def _mkdir_at(name: str, dir_fd: int) -> bool:
    """mkdir ``name`` relative to ``dir_fd``; False if it already existed."""
    try:
        os.mkdir(name, 0o755, dir_fd=dir_fd)
    except FileExistsError:
        return False
    return True
