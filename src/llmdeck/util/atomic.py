"""Atomic file writes: a result is either the old file or the whole new one, never half.

A path that cannot be written (a folder, a missing or read-only parent, a file in the way of a
parent) is a :class:`llmdeck.errors.UsageError` (exit 2) naming the path; a full disk is an
:class:`llmdeck.errors.OperationError` (exit 1).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from llmdeck.errors import LlmdeckError, OperationError, UsageError

_HINT = "Give the path of a file (not a folder) in a folder you can write to."


def write_error(path: Path, exc: OSError) -> LlmdeckError:
    """The llmdeck error for an OSError met while writing ``path``."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return OperationError(f"Cannot write {path}: {reason}.", hint="Free some disk space and retry.")
    return UsageError(f"Cannot write {path}: {reason}.", hint=_HINT)


def check_writable(path: Path) -> None:
    """Fail early (UsageError naming the path) when ``path`` could not be written atomically."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"Cannot write {path}: it is a folder, not a file.", hint=_HINT)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"Cannot write {path}: {parent} is not a folder.", hint=_HINT)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"Cannot write {path}: {parent} is not writable (permission denied).", hint=_HINT)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and an atomic rename."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"Cannot write {path}: it is a folder, not a file.", hint=_HINT)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from exc
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON data (pydantic models are dumped first) atomically."""
    if hasattr(data, "model_dump_json"):
        text = data.model_dump_json(indent=2)
    else:
        text = json.dumps(data, indent=2, ensure_ascii=False)
    atomic_write_text(path, text + "\n")
