"""Atomic file writes: a result is either the old file or the whole new one, never half.

One helper for every file llmdeck writes where the user chose the path (``connect --file``, ``--out``,
``--spec-out``, ``--html``, ``--plot``) or that holds a secret:

- it writes a temp file in the target's folder, then ``os.replace`` (atomic on one file system);
- through a symlink it writes the link's target (the link stays a link); missing folders are made
  only where the path itself names them: a dangling link, the file's own or one on its way (a folder
  that is a link to nothing), is refused (exit 2), never followed to make folders where it points;
- an existing file keeps its mode (and owner, where we may); a read-only file (no write bit) is
  refused with exit 2, never chmod-ed;
- a new file gets the usual mode (0666 less the umask), or 0600 with ``secret=True``; a folder made
  for it 0755 less the umask (never writable by group or others, even under ``umask 000``), 0700 for
  a secret (a client config with a key: no one else lists it, as llmdeck's state);
- a path that cannot be written (a folder, a read-only parent, a file in the way of a parent) is a
  :class:`llmdeck.errors.UsageError` (exit 2) naming the path; a full disk is an
  :class:`llmdeck.errors.OperationError` (exit 1).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from llmdeck.errors import LlmdeckError, OperationError, UsageError
from llmdeck.util.localfile import make_dirs

SECRET_MODE = 0o600
_HINT = "Give the path of a file (not a folder) in a folder you can write to."


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_error(path: Path, exc: OSError) -> LlmdeckError:
    """The llmdeck error for an OSError met while writing ``path``."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return OperationError(f"Cannot write {path}: {reason}.", hint="Free some disk space and retry.")
    return UsageError(f"Cannot write {path}: {reason}.", hint=_HINT)


def resolve_target(path: Path) -> Path:
    """Where a write to ``path`` really lands: a symlink's final target (dangling ones too)."""
    return Path(os.path.realpath(Path(path).expanduser()))


def _check_parent(path: Path) -> None:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"Cannot write {path}: {parent} is not a folder.", hint=_HINT)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"Cannot write {path}: {parent} is not writable (permission denied).", hint=_HINT)


def check_writable(path: Path) -> os.stat_result | None:
    """Fail early (UsageError naming the path) when ``path`` could not be written atomically: a
    folder, a read-only file, a parent that is a file or not writable. Returns the existing file's
    stat (None when there is none)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # e.g. a file in the way of a parent (ENOTDIR)
        raise write_error(path, exc) from exc
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"Cannot write {path}: it is a folder, not a file.", hint=_HINT)
    if st is not None and not stat.S_ISREG(st.st_mode):
        from llmdeck.util.localfile import not_regular

        reason = not_regular(path, st.st_mode).strerror
        raise UsageError(f"Cannot write {path}: {reason}; llmdeck neither reads nor replaces it.", hint=_HINT)
    if st is not None and not st.st_mode & 0o222:
        raise UsageError(
            f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):o}); llmdeck does not overwrite files "
            "you protected.",
            hint=f"Make it writable yourself (chmod u+w {path}) if it should be replaced, "
            "or write elsewhere.",
        )
    _check_parent(path)
    return st


def atomic_write_bytes(path: Path, data: bytes, *, secret: bool = False) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename.

    ``secret``: the data holds a key or token; a new file is made 0600, an existing one keeps its own
    mode less what lets others read it (a key is never left where other users read it)."""
    target = resolve_target(Path(path))
    if Path(path).expanduser().is_symlink() and not target.parent.is_dir():
        raise UsageError(  # a dangling link: its target's folders are not llmdeck's to make
            f"Cannot write {path}: it is a symbolic link to {target}, whose folder does not exist.",
            hint="Point the link at a file in an existing folder, or give another path.",
        )
    link = _dangling_folder_link(Path(path).expanduser())
    if link is not None:  # `--plot LINK/out.png`, LINK -> a folder that is not there: had been made
        raise UsageError(
            f"Cannot write {path}: {link} is a symbolic link to {resolve_target(link)}, which is not there.",
            hint="Point the link at an existing folder, or give another path.",
        )
    existing = check_writable(target)
    if existing is not None:
        mode = stat.S_IMODE(existing.st_mode) & (~0o077 if secret else 0o7777)
    else:
        mode = SECRET_MODE if secret else _umask_mode()
    try:
        make_dirs(target.parent, 0o700 if secret else 0o755)  # never group/world-writable
        _sweep_dead_writers(target)
        tmp_prefix = f".{target.name}.{_TMP_TAG}{os.getpid()}-"  # whose it is: see _sweep_dead_writers
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix, suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise write_error(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if existing is not None:
                with contextlib.suppress(PermissionError):
                    os.fchown(fh.fileno(), existing.st_uid, existing.st_gid)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(target, exc) from exc
        raise


def _dangling_folder_link(path: Path) -> Path | None:
    """The nearest folder of ``path`` that is there as a name, if it is a symbolic link to nothing."""
    folder = Path(os.path.abspath(path)).parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    return folder if folder.is_symlink() and not folder.exists() else None


_TMP_TAG = "llmdeck-"
_SWEPT: set[Path] = set()


def _sweep_dead_writers(target: Path) -> None:
    """Remove the temp files a killed writer of ``target`` left beside it (``.NAME.llmdeck-PID-*.tmp``,
    this user's, PID no longer running): a SIGKILL between the temp file and the rename had left one in
    the user's folder for ever. Once per target and process (a result rewritten every second)."""
    if target in _SWEPT:
        return
    _SWEPT.add(target)
    head = f".{target.name}.{_TMP_TAG}"
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            pid = entry.name[len(head) :].partition("-")[0]
            if not (entry.name.startswith(head) and entry.name.endswith(".tmp") and pid.isdigit()):
                continue
            if int(pid) != os.getpid() and not _alive(int(pid)) and entry.stat().st_uid == os.getuid():
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process, alive
        return True
    return True


def shared_with_others(path: Path) -> bool:
    """``path`` (through a link) exists and its group or everyone may read or write it."""
    try:
        return bool(resolve_target(Path(path)).stat().st_mode & 0o077)
    except OSError:
        return False


def _not_utf8(path: Path) -> UsageError:
    """A value to be written holds bytes that are no UTF-8 (a lone surrogate: ``$'\\xff'`` typed on the
    command line): bad input, where it had been an internal error (UnicodeEncodeError)."""
    return UsageError(
        f"Cannot write {path}: a value you gave holds bytes that are not UTF-8 text, which the file "
        "cannot hold.",
        hint="Type the names and values again in UTF-8 (check the terminal's encoding).",
    )


def atomic_write_text(path: Path, text: str, *, secret: bool = False) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise _not_utf8(path) from None
    atomic_write_bytes(path, data, secret=secret)


def atomic_write_json(path: Path, data: Any, *, secret: bool = False) -> None:
    """Write JSON data (pydantic models are dumped first) atomically."""
    try:
        if hasattr(data, "model_dump_json"):
            text = data.model_dump_json(indent=2)
        else:
            text = json.dumps(data, indent=2, ensure_ascii=False)
    except ValueError as exc:  # pydantic's PydanticSerializationError is one
        if "surrogates not allowed" not in str(exc):
            raise
        raise _not_utf8(path) from None
    atomic_write_text(path, text + "\n", secret=secret)
