"""A launch's own folder removed once its client has exited (``python -m llmdeck.connect.launch_sweep PID
TICK FOLDER``, detached, the standard library only).

`llmdeck launch` writes the client's settings under ``<state>/launch/CLIENT/PID/`` (Claude Code's hold the
key: its env block must win over the user's own settings) and then execs the client, so nothing of
llmdeck is left to remove them: they had stayed, key and all, until a later launch pruned them. This
watcher looks every second whether the process it was given (the pid, and the start tick it had, which the
exec keeps) still runs, then removes the folder.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

POLL_S = 1.0


def start_tick(pid: int) -> str | None:
    """``pid``'s start tick since boot (/proc/PID/stat), or None when it has ended (or is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().decode("utf-8", "replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


def sweep(pid: int, tick: str, folder: Path, poll_s: float = POLL_S) -> None:
    """Wait while ``pid`` is the process that started at ``tick``, then remove ``folder``."""
    while start_tick(pid) == tick:
        time.sleep(poll_s)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sweep(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
