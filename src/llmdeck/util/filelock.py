"""One command at a time on a piece of state: an exclusive ``flock`` on a lock file beside it.

Two `gateway up` run at once had both checked "no gateway recorded", both spawned one, and the record
named the one that lost the port while the other served on, unrecorded. Held across check, start and
record, the lock makes the second wait for the first and then see its record. Bounded: a holder that
never lets go is named after ``timeout_s``, not waited on forever. The lock goes with the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path

from llmdeck.errors import OperationError
from llmdeck.util.localfile import ensure_dir


@contextlib.contextmanager
def exclusive(path: Path, *, timeout_s: float, what: str) -> Iterator[None]:
    """Hold ``path`` (made if missing) locked for the block; OperationError after ``timeout_s``."""
    ensure_dir(path.parent)
    with open(path, "a", encoding="utf-8") as fh:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OperationError(
                        f"Another {what} has held {path} for {timeout_s:g} s.",
                        hint="Wait for it to finish (or stop it), then run this again.",
                    ) from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
