"""Clean-up that a second Ctrl-C cannot cut short.

When ``up`` is interrupted while it waits for the engine, it stops the engine it started (up to its
grace period, then SIGKILL). A second Ctrl-C during that stop (a user who pressed it twice, or
``timeout`` passing on the SIGINT the terminal already sent the whole group) had broken off the stop
itself: the command said "Interrupted", and the engine it was meant to stop ran on, ready, holding
its memory. :func:`interrupts_held` keeps SIGINT, SIGTERM and SIGHUP from raising while such a
clean-up runs (each is noted on stderr); the command exits as the first one asked once it is done.
Every clean-up it guards is bounded (a grace period, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_held(doing: str, held: list[int] | None = None) -> Iterator[list[int]]:
    """Run the block with SIGINT, SIGTERM and SIGHUP held (the signals that came, in order, are the
    yielded list: ``held`` when given, for a caller that hands the block to another function); ``doing``
    says what is finishing (``stopping the engine``). Main thread only: a signal handler can only be set
    there, and elsewhere the block simply runs."""
    held = [] if held is None else held
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: Any) -> None:
        held.append(signum)
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a closed stderr
            sys.stderr.write(f"llmdeck: still {doing}; it ends on its own in a few seconds.\n")
            sys.stderr.flush()

    previous = {sig: signal.signal(sig, hold) for sig in HELD}
    try:
        yield held
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before if before is not None else signal.SIG_DFL)
