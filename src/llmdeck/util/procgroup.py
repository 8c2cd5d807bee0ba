"""A process group, by its id: signal it, ask whether any member is left. One place for what the
engines' stop, the leash's watcher, the eval's agent and hidden tests, the local Ray cluster, the
all-reduce ranks and doctor's probes all do to the group they started in a session of its own."""

from __future__ import annotations

import contextlib
import os
import signal


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """``sig`` to every process of the group ``pgid``; a group already gone (or not ours) is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether a process of the group ``pgid`` is left (one of another user's counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
