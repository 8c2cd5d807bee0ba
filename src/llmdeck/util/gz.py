"""Result files kept gzipped (evidence folders keep bench results as ``.json.gz``) read like plain ones:
the gzip magic decides, not the name; a file that inflates past ``MAX_INFLATED`` (the bound a plain file
gets) is refused, so a gzip bomb handed to ``llmdeck report`` costs a bounded read, not the machine's
memory."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from llmdeck.errors import InternalError
from llmdeck.util import localfile
from llmdeck.util.localfile import read_regular

GZIP_MAGIC = b"\x1f\x8b"
# what a plain file may hold (localfile.MAX_FILE_BYTES, 2 GiB), a gzipped one may inflate to: one bound
# for the file's content, however it is stored (a bench result with every request's ITL is tens of MB)
MAX_INFLATED = localfile.MAX_FILE_BYTES


class InflateError(InternalError, ValueError):
    """A gzipped file that is corrupt, cut short, or inflates past the limit."""


class InflatedTooLargeError(InflateError):
    """A gzipped file whose content is larger than the limit (a gzip bomb, or no result file)."""


def is_gzip(path: Path) -> bool:
    """True for a gzipped file; ``OSError`` (``NotRegularFileError`` for a pipe or device) when unreadable."""
    return read_regular(Path(path), 2, head=True) == GZIP_MAGIC


def read_head(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of the file's content (inflated when it is gzipped)."""
    head = read_regular(Path(path), n, head=True)  # never blocks on a pipe
    if not head.startswith(GZIP_MAGIC):
        return head
    try:
        with gzip.open(path, "rb") as gz:
            return gz.read(n)
    except (OSError, EOFError, zlib.error):
        return b""


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The file's content, inflated when it is gzipped, at most ``limit`` bytes (default
    ``MAX_INFLATED``) either way: ``FileTooLargeError`` for a plain file, InflatedTooLargeError for a
    gzipped one; InflateError when it cannot be inflated."""
    p = Path(path)
    limit = MAX_INFLATED if limit is None else limit
    if not is_gzip(p):
        return read_regular(p, limit)
    out = bytearray()
    try:
        with gzip.open(p, "rb") as gz:
            while chunk := gz.read(1 << 20):
                out += chunk
                if len(out) > limit:
                    raise InflatedTooLargeError(f"it inflates past {limit >> 20} MiB")
    except (OSError, EOFError, zlib.error) as exc:
        raise InflateError(f"it is gzipped but cannot be inflated: {exc}") from exc
    return bytes(out)
