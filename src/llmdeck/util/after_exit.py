"""A folder removed once a process has exited (``python -m llmdeck.util.after_exit PID TICK FOLDER``,
detached; util/ imports nothing heavy, so it starts in tens of milliseconds); and a process's start
tick, read from /proc/PID/stat (engines.process.since_boot reads it there too).

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


def read_stat(pid: int) -> tuple[str, int] | None:
    """``pid``'s state letter and start tick since boot (None when it is gone, or off Linux). The command
    name (field 2) is in parentheses and may hold anything: fields are counted from after it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().decode("utf-8", "replace").rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def start_tick(pid: int) -> str | None:
    """``pid``'s start tick, or None when it has ended (or is a zombie)."""
    stat = read_stat(pid)
    return None if stat is None or stat[0] == "Z" else str(stat[1])


def sweep(pid: int, tick: str, folder: Path, poll_s: float = POLL_S) -> None:
    """Wait while ``pid`` is the process that started at ``tick``, then remove ``folder``."""
    while start_tick(pid) == tick:
        time.sleep(poll_s)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sweep(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
