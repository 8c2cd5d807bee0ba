"""Reading a local file the user named, without ever waiting on it or reading without end.

A named pipe, a socket or a device (``/dev/zero``, a FIFO made with ``mkfifo``) would block a plain
``open``/``read`` forever or feed it endlessly; every loader of a user-given file (config.json, launch
specs, result and trials files, gateway configs, client configs) reads through :func:`read_regular`,
which opens without blocking, refuses anything that is not a regular file and caps the size. The
failures are :class:`OSError` subclasses, so the loaders' ``except OSError`` turns them into their own
one-paragraph error (``exc.strerror`` says what is wrong).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from llmdeck.errors import InternalError, LlmdeckError, OperationError, UsageError

MAX_FILE_BYTES = 2 << 30  # 2 GiB: far above any result, spec or config llmdeck writes or reads


class _FileError(InternalError, OSError):
    """An ``OSError`` (``errno, strerror, filename``) that loaders turn into their own message."""

    def __init__(self, code: int, strerror: str, filename: str) -> None:
        OSError.__init__(self, code, strerror, filename)
        self.message, self.hint = str(self), None


class NotRegularFileError(_FileError):
    """The path is a named pipe, socket, device or folder, not a regular file."""


class FileTooLargeError(_FileError):
    """The file is larger than the loader's limit."""


def kind_of(mode: int) -> str:
    """What a file is, in words (``a file``, ``a folder``, ``a named pipe (FIFO)``, ``a socket``, ...)."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def not_regular(path: Path, mode: int) -> NotRegularFileError:
    what = kind_of(mode)
    return NotRegularFileError(errno.EINVAL, f"it is {what}, not a regular file", str(path))


def check_regular(path: Path) -> None:
    """Raise :class:`NotRegularFileError` when ``path`` exists but is not a regular file (no open).

    A missing path raises ``FileNotFoundError`` as ``os.stat`` does."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise not_regular(Path(path), mode)


def read_regular(path: Path, limit: int = MAX_FILE_BYTES, *, head: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``; with ``head`` the first ``limit``).

    Opens with ``O_NONBLOCK`` (a FIFO without a writer never blocks the open), checks the opened
    file is regular, then reads. :class:`NotRegularFileError` / :class:`FileTooLargeError` (both
    ``OSError``) otherwise."""
    p = Path(path)
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(p, st.st_mode)
        if not head and st.st_size > limit:
            raise FileTooLargeError(
                errno.EFBIG, f"it is {st.st_size:,} bytes, more than the {limit:,} llmdeck reads", str(p)
            )
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if head:
        return data[:limit]
    if len(data) > limit:  # grew while read
        raise FileTooLargeError(errno.EFBIG, f"it is more than the {limit:,} bytes llmdeck reads", str(p))
    return data


def read_regular_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """:func:`read_regular` decoded as UTF-8 (``UnicodeDecodeError`` as ``str.decode`` raises it)."""
    return read_regular(path, limit).decode("utf-8")


def _blocker(path: Path) -> Path:
    """The nearest part of ``path`` (itself or a parent) that exists but is not a folder."""
    for part in [path, *path.parents]:
        if part.exists() or part.is_symlink():
            return part if not part.is_dir() else path
    return path


def ensure_dir(path: Path, mode: int = 0o700) -> Path:
    """``mkdir -p path`` for llmdeck's own folders; a file in the way (the path itself or a parent) is a
    UsageError naming it. Every folder it makes, the parents too, gets ``mode`` (less the umask), never
    more: ``mkdir -p`` had made the parents (the state root) 0777 under ``umask 000``, so any local user
    could swap ``servers/`` for one of planted records. Folders already there are left as they are."""
    p = Path(path)
    try:
        make_dirs(p, mode)
    except (FileExistsError, NotADirectoryError) as exc:
        raise UsageError(
            f"Cannot create the folder {p}: {_blocker(p)} is a file, not a folder.",
            hint="Move that file away (or point llmdeck at another folder) and run the command again.",
        ) from exc
    except PermissionError as exc:
        raise UsageError(
            f"Cannot create the folder {p}: permission denied.", hint="Choose a folder you can write to."
        ) from exc
    except OSError as exc:  # a read-only file system, a full disk: had been an "internal error"
        raise _folder_error(p, exc) from exc
    return p


def make_dirs(path: Path, mode: int) -> None:
    """``path`` and its missing parents made one by one, top down, each with ``mode`` less the umask
    and never writable by group or others."""
    for part in [*reversed(path.parents), path]:
        if part.is_dir():
            continue
        try:
            part.mkdir(mode & 0o755)
        except FileExistsError:
            if not part.is_dir():  # a file there (a folder made there meanwhile is fine)
                raise


def _folder_error(path: Path, exc: OSError) -> LlmdeckError:
    """The llmdeck error for a folder that could not be made: no space is exit 1, the rest exit 2."""
    why = f"Cannot create the folder {path}: {exc.strerror or type(exc).__name__}."
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return OperationError(why, hint="Free some disk space and retry.")
    return UsageError(why, hint="Choose a folder you can write to (LLMDECK_STATE_DIR for llmdeck's own).")


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(inode, mtime in ns) of ``path``, None while there is none: compared before and after a run, did
    the run write it? (An atomic replace changes the inode, an edit the mtime.)"""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns
