"""What llmdeck made, it may replace; nothing else.

When llmdeck makes a folder it writes a marker file into it first (:data:`MADE_MARKER`), so even a
half-made folder (an interrupted run) is known as llmdeck's. ``--force`` replaces a folder's contents
only when the marker is there; a folder of the user's files is refused (exit 2) with nothing deleted.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from llmdeck.errors import AlreadyExistsError

MADE_MARKER = ".llmdeck-made"
MADE_KIND = "llmdeck-made"


def mark_made(dir: Path, what: str) -> None:
    """Create ``dir`` (if needed) and write the marker saying llmdeck made it, for ``what``."""
    dir.mkdir(parents=True, exist_ok=True)
    body = {"kind": MADE_KIND, "what": what, "created": datetime.now(UTC).isoformat()}
    (dir / MADE_MARKER).write_text(json.dumps(body) + "\n", encoding="utf-8")


def is_made_by_llmdeck(dir: Path, legacy_markers: Iterable[tuple[str, str]] = ()) -> bool:
    """True when ``dir`` carries llmdeck's marker (or a legacy marker file ``name`` whose JSON has
    ``kind``, given as (name, kind) pairs). A symlinked marker does not count."""
    markers = [(MADE_MARKER, MADE_KIND), *legacy_markers]
    for name, kind in markers:
        path = dir / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == kind:
            return True
    return False


def refuse_unless_made(dir: Path, what: str, legacy_markers: Iterable[tuple[str, str]] = ()) -> None:
    """AlreadyExistsError (exit 2) unless ``dir`` is empty, missing, or made by llmdeck."""
    if not dir.is_dir() or not any(dir.iterdir()) or is_made_by_llmdeck(dir, legacy_markers):
        return
    shown = ", ".join(sorted(p.name for p in dir.iterdir())[:3])
    raise AlreadyExistsError(
        f"{dir} holds files llmdeck did not make ({shown} …): it has no {MADE_MARKER} marker, so "
        f"--force will not delete anything there to make the {what}.",
        hint=f"Pick an empty or new directory for the {what}, or empty this one yourself.",
    )


def clear_made_dir(dir: Path, what: str, legacy_markers: Iterable[tuple[str, str]] = ()) -> None:
    """Delete the contents of a folder llmdeck made (checked again right here); symlinks are removed,
    never followed."""
    if not dir.is_dir():
        return
    refuse_unless_made(dir, what, legacy_markers)
    for child in dir.iterdir():
        if child.name == MADE_MARKER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
