"""Which kind of llmdeck file a path is, from its first 4 KB: every result file opens with its
``"kind"`` (any JSON spacing — compact files too: a literal ``'"kind": "..."'`` once took a compact
eval result for a bench result)."""

from __future__ import annotations

import re
from pathlib import Path


def has_kind(path: Path, kind: str) -> bool:
    """True when ``path`` is a readable file whose head names ``kind``."""
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return re.search(rb'"kind"\s*:\s*"' + re.escape(kind.encode()) + rb'"', head) is not None
