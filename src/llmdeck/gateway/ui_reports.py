"""The bench / tune / eval HTML pages in the results folder (``LLMDECK_RESULTS_DIR``), for the dashboard.

Listed up to three folders deep, newest first; served at ``/ui/results/PATH`` only when PATH resolves to
an ``.html`` file inside the folder (no symlink out, no ``..``), with a ``sandbox`` CSP: the page runs
in an origin of its own, so a page from elsewhere put in the folder cannot call the dashboard's API.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from llmdeck.gateway.ui_schema import ReportLink

MAX_REPORTS = 60
MAX_REPORT_BYTES = 64 << 20
REPORT_CSP = "sandbox allow-scripts; default-src 'self' 'unsafe-inline' data:; connect-src 'none'"


def _kind(rel: Path) -> str:
    parts = [p.lower() for p in rel.parts]
    text = "/".join(parts)
    for kind in ("tune", "eval", "bench"):
        if kind in text:
            return kind
    return "report"


def scan_reports(root: Path) -> list[ReportLink]:
    """Every ``*.html`` under ``root`` (depth ≤ 3), newest first (blocking: run in a thread)."""
    if not root.is_dir():
        return []
    found: list[tuple[float, int, Path]] = []
    for pattern in ("*.html", "*/*.html", "*/*/*.html"):
        for path in root.glob(pattern):
            if path.is_symlink() or not path.is_file() or not _utf8(path.name):
                continue  # a name that is no UTF-8 cannot be a link (it had hidden every report)
            st = path.stat()
            found.append((st.st_mtime, st.st_size, path.relative_to(root)))
    found.sort(reverse=True)
    return [
        ReportLink(
            name=rel.as_posix(),
            kind=_kind(rel),
            href="/ui/results/" + quote(rel.as_posix()),
            modified=mtime,
            bytes=size,
        )
        for mtime, size, rel in found[:MAX_REPORTS]
    ]


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # bytes the file system holds that are no UTF-8 (surrogate escapes)
        return False
    return True


def report_path(root: Path, rel: str) -> Path | None:
    """The file ``rel`` names inside ``root``, or None when it is not a servable report."""
    if not rel.endswith(".html") or "\x00" in rel:
        return None
    candidate = root / rel
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if resolved.parent != root and root not in resolved.parents:
        return None
    if candidate.is_symlink() or not resolved.is_file() or resolved.stat().st_size > MAX_REPORT_BYTES:
        return None
    return resolved
