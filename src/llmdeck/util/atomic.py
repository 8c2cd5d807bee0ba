"""Atomic file writes: a result is either the old file or the whole new one, never half.

One helper for every file llmdeck writes where the user chose the path (``connect --file``, ``--out``,
``--spec-out``) or that holds a secret:

- it writes a temp file in the target's folder, then ``os.replace`` (atomic on one file system);
- through a symlink it writes the link's target (the link stays a link);
- an existing file keeps its mode (and owner, where we may); a read-only file (no write bit) is
  refused with exit 2, never chmod-ed;
- a new file gets the usual mode (0666 less the umask), or 0600 with ``secret=True``.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from llmdeck.errors import UsageError

SECRET_MODE = 0o600


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def resolve_target(path: Path) -> Path:
    """Where a write to ``path`` really lands: a symlink's final target (dangling ones too)."""
    return Path(os.path.realpath(Path(path).expanduser()))


def check_writable(path: Path) -> os.stat_result | None:
    """The existing file's stat (None when there is none); UsageError when it is a folder or read-only."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path} is a folder, not a file.", hint="Give the path of a file to write.")
    if not st.st_mode & 0o222:
        raise UsageError(
            f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):o}); llmdeck does not overwrite files "
            "you protected.",
            hint=f"Make it writable yourself (chmod u+w {path}) if it should be replaced, "
            "or write elsewhere.",
        )
    return st


def atomic_write_bytes(path: Path, data: bytes, *, secret: bool = False) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename.

    ``secret``: the data holds a key or token; a new file is made 0600 (an existing file keeps its
    own mode: the user chose it)."""
    target = resolve_target(Path(path))
    existing = check_writable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if existing is not None:
        mode = stat.S_IMODE(existing.st_mode)
    else:
        mode = SECRET_MODE if secret else _umask_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str, *, secret: bool = False) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), secret=secret)


def atomic_write_json(path: Path, data: Any, *, secret: bool = False) -> None:
    """Write JSON data (pydantic models are dumped first) atomically."""
    if hasattr(data, "model_dump_json"):
        text = data.model_dump_json(indent=2)
    else:
        text = json.dumps(data, indent=2, ensure_ascii=False)
    atomic_write_text(path, text + "\n", secret=secret)
