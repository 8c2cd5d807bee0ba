"""What llmdeck made, it may replace; nothing else.

When llmdeck makes a folder it writes a marker file into it first (:data:`MADE_MARKER`), so even a
half-made folder (an interrupted run) is known as llmdeck's; when it is done it lists there the files it
wrote (:func:`seal_made`). ``--force`` deletes only those, when the marker is there: a file the user
added to the folder is kept, and a folder of the user's files is refused (exit 2) with nothing deleted.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from llmdeck.errors import AlreadyExistsError
from llmdeck.util.jsonsafe import loads as _json_loads

MADE_MARKER = ".llmdeck-made"
MADE_KIND = "llmdeck-made"


def mark_made(dir: Path, what: str, *, private: bool = False) -> None:
    """Create ``dir`` (if needed) and write the marker saying llmdeck made it, for ``what``; its list
    of the files llmdeck wrote stays empty until :func:`seal_made`.

    ``private``: what goes there can hold a secret (a server's log, an agent's output with its key in
    reach): each folder made is 0700, as llmdeck's state, even under ``umask 000``; otherwise (a model,
    specs) as ``mkdir -p`` makes it. A folder that exists is left as it is."""
    if private:
        from llmdeck.util.localfile import make_dirs

        make_dirs(dir, 0o700)
    else:
        dir.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).isoformat()
    body = {"kind": MADE_KIND, "what": what, "created": now, "files": [], "kept": _files_in(dir)}
    _write_marker(dir / MADE_MARKER, body)


def seal_made(dir: Path) -> None:
    """Record in the marker the files written since :func:`mark_made` (the writer is done): what a
    later ``--force`` may delete. Files that were there before (the user's, kept) are not listed."""
    marker = dir / MADE_MARKER
    body = _json_loads(marker.read_text("utf-8"))
    kept = set(body.get("kept") or [])
    body["files"] = [f for f in _files_in(dir) if f not in kept]
    _write_marker(marker, body)


def _write_marker(marker: Path, body: Mapping[str, object]) -> None:
    """Whole or not at all: a marker read half-written (two makers at once: a test session's workers) is
    no list, which refuses the folder."""
    from llmdeck.util.atomic import atomic_write_text

    atomic_write_text(marker, json.dumps(body) + "\n")


def _files_in(dir: Path) -> list[str]:
    files = (p.relative_to(dir).as_posix() for p in dir.rglob("*") if p.is_file() or p.is_symlink())
    return sorted(f for f in files if f != MADE_MARKER)


def _made_files(dir: Path, legacy_markers: Iterable[tuple[str, str]] = ()) -> list[Path] | None:
    """The files the marker says llmdeck wrote (inside ``dir`` only): the list of :data:`MADE_MARKER`,
    else that of a legacy marker (its ``files``, and the marker itself); None for a marker without a
    list (made by an llmdeck before lists were kept)."""
    listed = _listed(dir / MADE_MARKER)
    for name, _kind in legacy_markers if listed is None else ():
        listed = _listed(dir / name)
        if listed is not None:
            listed = [*listed, name]
            break
    if listed is None:
        return None
    safe = [
        f for f in listed if isinstance(f, str) and f and not f.startswith("/") and ".." not in f.split("/")
    ]
    return [dir / f for f in safe]


def _listed(marker: Path) -> list[object] | None:
    if marker.is_symlink():
        return None
    try:
        listed = _json_loads(marker.read_text("utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return None
    return listed if isinstance(listed, list) else None


def is_made_by_llmdeck(dir: Path, legacy_markers: Iterable[tuple[str, str]] = ()) -> bool:
    """True when ``dir`` carries llmdeck's marker (or a legacy marker file ``name`` whose JSON has
    ``kind``, given as (name, kind) pairs). A symlinked marker does not count."""
    markers = [(MADE_MARKER, MADE_KIND), *legacy_markers]
    for name, kind in markers:
        path = dir / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = _json_loads(path.read_text("utf-8"))
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
        f"llmdeck will not delete anything there to make the {what}.",
        hint=f"Pick an empty or new directory for the {what}, or empty this one yourself.",
    )


def clear_made_dir(dir: Path, what: str, legacy_markers: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Delete what llmdeck wrote into a folder it made (checked again right here): the files its marker
    lists, and the folders they leave empty; symlinks are removed, never followed. Returns the names
    kept (files the user added). A marker without a list (an older llmdeck's) is refused: nothing
    there tells its files from the user's. So is a listed file that is a folder now (the user's)."""
    if not dir.is_dir():
        return []
    refuse_unless_made(dir, what, legacy_markers)
    made = _made_files(dir, legacy_markers)
    if made is None and not any(dir.iterdir()):
        return []  # an empty folder: nothing of anyone's to delete
    if made is None:
        raise AlreadyExistsError(
            f"{dir} was made by an older llmdeck, which did not list the files it wrote: llmdeck cannot "
            f"tell them from files added since, so it deletes nothing there to make the {what}.",
            hint=f"Pick a new directory for the {what}, or empty this one yourself.",
        )
    folders = [p for p in made if p.is_dir() and not p.is_symlink()]
    if folders:
        raise AlreadyExistsError(
            f"{folders[0]} is a folder now, where llmdeck had written a file: it is not llmdeck's, and "
            f"the {what} cannot be written over it.",
            hint="Move that folder away yourself, or pick another directory.",
        )
    for path in made:
        if path.is_symlink() or path.is_file():
            path.unlink()
    for folder in sorted({p.parent for p in made}, key=lambda p: len(p.parts), reverse=True):
        if folder != dir and folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
    return sorted(p.name for p in dir.iterdir() if p.name != MADE_MARKER)


def refuse_user_files(dir: Path, names: Iterable[str]) -> None:
    """AlreadyExistsError (exit 2) when one of ``names`` is in ``dir``, a folder llmdeck made, but not
    among the files its marker says llmdeck wrote: the user put it there, and ``--force`` must not
    replace it. Checked before anything is cleared, unloaded or written."""
    made = _made_files(dir) if (dir / MADE_MARKER).is_file() else None
    if made is None:
        return  # a new folder, or an older llmdeck's marker (no list to tell the files apart)
    theirs = [n for n in names if (dir / n).exists() and dir / n not in made]
    if theirs:
        raise AlreadyExistsError(
            f"{dir} holds {', '.join(theirs)}, which llmdeck did not write there; --force replaces only "
            "llmdeck's own files.",
            hint="Move those files away yourself, or give another --out folder.",
        )


def refuse_foreign_file(
    path: Path, what: str, is_ours: Callable[[bytes], bool], *, tail_too: bool = False
) -> None:
    """AlreadyExistsError (exit 2) when ``path`` exists, is not empty, and ``is_ours(first bytes)``
    (``tail_too``: and the last 64 KiB) says llmdeck did not write it: an output path must never replace
    the user's own file."""
    target = Path(os.path.realpath(Path(path).expanduser()))
    try:
        mode = target.stat().st_mode
    except OSError:
        return  # nothing there (or unreadable: the writer says what is wrong)
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a FIFO's open had waited for ever
        from llmdeck.util.localfile import kind_of

        raise AlreadyExistsError(
            f"{path} is {kind_of(mode)}, not a file llmdeck can write its {what} to.",
            hint="Give the path of a regular file (new, or one llmdeck wrote).",
        )
    try:
        with open(target, "rb") as fh:
            head = fh.read(65536)
            if tail_too:
                fh.seek(max(len(head), os.fstat(fh.fileno()).st_size - 65536))
                head += fh.read(65536)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return  # nothing there (or a folder / unreadable: the writer says what is wrong)
    if not head.strip() or is_ours(head):
        return
    raise AlreadyExistsError(
        f"{path} exists and is not {'an' if what[:1] in 'aeiou' else 'a'} {what} llmdeck wrote; llmdeck will "
        "not replace it.",
        hint="Give another output path, or move that file away yourself.",
    )


def json_kind_is(*kinds: str) -> Callable[[bytes], bool]:
    """An ``is_ours`` test: a JSON file whose ``"kind"`` (llmdeck writes it near the top) is one of
    ``kinds``."""
    pattern = re.compile(
        rb'^\s*\{.*?"kind"\s*:\s*"(' + b"|".join(re.escape(k.encode()) for k in kinds) + rb')"', re.S
    )
    return lambda head: bool(pattern.match(head))


def json_has_keys(*keys: str) -> Callable[[bytes], bool]:
    """An ``is_ours`` test for small JSON files without a kind (launch specs): an object with ``keys``."""

    def test(head: bytes) -> bool:
        try:
            data = _json_loads(head)
        except ValueError:
            return False
        return isinstance(data, dict) and all(k in data for k in keys)

    return test


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


PLOT_MARK = "llmdeck report --plot"  # in the picture's metadata (PNG Software, SVG/PDF Creator)


def is_plot(ends: bytes) -> bool:
    """A picture `report --plot` wrote (its first and last 64 KiB: a PDF's metadata is at its end). Any
    PNG, PDF or SVG had counted, and a user's own was replaced."""
    return PLOT_MARK.encode() in ends


HTML_GENERATOR = '<meta name="generator" content="llmdeck">'
_PAGE_CSP = b'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src'


def is_report_page(head: bytes) -> bool:
    """A page llmdeck's reports write (bench, tune, eval): its generator tag, or (pages written before
    the tag) the doctype, llmdeck's strict CSP line and an llmdeck title."""
    if HTML_GENERATOR.encode() in head:
        return True
    return head.lstrip().startswith(b"<!DOCTYPE html>") and _PAGE_CSP in head and b"<title>llmdeck" in head
