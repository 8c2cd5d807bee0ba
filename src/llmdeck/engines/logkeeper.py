"""A running server's log kept bounded (``python -m llmdeck.engines.logkeeper PGID LOG INODE MAX POLL``).

vLLM writes to the log llmdeck opened as its stdout and stderr for as long as it serves, which is weeks:
an access line per request and per health probe (~90 bytes), its throughput line every 10 s while
busy, every warning. ``up`` rotated the log only at a start, so a server left running filled the disk
in the end. Beside each local server ``up`` leaves this small process (no engine import: ~15 MB): every
:data:`POLL_S` seconds it reads the log's size, and past ``MAX_BYTES`` moves it along in place
(:func:`~llmdeck.engines.logfiles.copy_truncate`: NAME.log.1 … .3, the oldest dropped), so a server's
logs take at most four times :data:`MAX_LOG_BYTES`. It exits once the server's process group is gone,
or the log is another file (a new start moved this one along: that start has its own keeper).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

MAX_LOG_BYTES = 64 << 20
POLL_S = 5.0
MIN_POLL_S = 0.05  # a log that floods is looked at this often at most


def spawn(pgid: int, log_path: Path) -> int | None:
    """Start the keeper of ``log_path`` for the server whose process group is ``pgid``, detached (its
    own session, so that it outlives this command as the server does); its pid, or None when it could
    not start (the log then grows as before: nothing else depends on it)."""
    from llmdeck.engines.process import spawn_module

    try:  # read here, under the start's lock: no other start can have moved this log along yet
        inode = os.stat(log_path).st_ino
        args = [str(pgid), str(log_path), str(inode), str(MAX_LOG_BYTES), f"{POLL_S:g}"]
        return spawn_module("llmdeck.engines.logkeeper", args).pid
    except OSError:
        return None


def keep(pgid: int, log_path: Path, inode: int, max_bytes: int, poll_s: float = POLL_S) -> None:
    """Rotate ``log_path`` in place whenever it is past ``max_bytes``, until the group ``pgid`` is gone
    or the log is no longer the file ``inode``. A rotation that fails (a full disk) is tried again once
    the log has grown by another ``max_bytes``. A log that grows fast is looked at again before it can
    reach the bound at the pace it grew (every ``poll_s`` had let a 50 MB/s flood make 250 MB logs)."""
    from llmdeck.engines.logfiles import copy_truncate
    from llmdeck.util.procgroup import group_alive

    limit = max_bytes
    seen, at = -1, time.monotonic()  # the size at the last look (none yet), and when
    while group_alive(pgid):
        try:
            st = os.stat(log_path)
        except OSError:
            return
        if st.st_ino != inode:
            return
        pace = max(0, st.st_size - seen) / max(time.monotonic() - at, 1e-3) if seen >= 0 else 0.0  # B/s
        seen, at = st.st_size, time.monotonic()
        if st.st_size > limit:
            try:
                copy_truncate(log_path, _note(log_path, max_bytes))
                limit, seen = max_bytes, 0
            except OSError:
                limit = st.st_size + max_bytes
        time.sleep(min(poll_s, max(MIN_POLL_S, (limit - seen) / pace)) if pace > 0 else poll_s)


def _note(log_path: Path, max_bytes: int) -> str:
    size = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes} bytes"
    return (
        f"# llmdeck: {datetime.now(UTC).isoformat()} continued: the log before this one is "
        f"{log_path.name}.1 (rotated past {size})\n"
    )


def main(argv: list[str]) -> int:
    keep(int(argv[0]), Path(argv[1]), int(argv[2]), int(argv[3]), float(argv[4]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
