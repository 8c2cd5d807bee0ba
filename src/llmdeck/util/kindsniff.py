"""Which kind of llmdeck file a path is, from its first 4 KB: every result file opens with its
``"kind"`` (any JSON spacing — compact files too: a literal ``'"kind": "..."'`` once took a compact
eval result for a bench result). A gzipped file is sniffed inflated."""

from __future__ import annotations

import re
from pathlib import Path


def has_kind(path: Path, kind: str) -> bool:
    """True when ``path`` is a readable file (gzipped or not) whose head names ``kind``."""
    from llmdeck.util.gz import read_head

    try:
        head = read_head(Path(path), 4096)
    except OSError:
        return False
    return re.search(rb'"kind"\s*:\s*"' + re.escape(kind.encode()) + rb'"', head) is not None
