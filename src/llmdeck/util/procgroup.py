"""A process group, by its id: signal it, ask whether any member is left. One place for what the
engines' stop, the leash's watcher, the eval's agent and hidden tests, the local Ray cluster, the
all-reduce ranks and doctor's probes all do to the group they started in a session of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


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


def run_in_group(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``argv`` in a session of its own, its output decoded (bytes that are not UTF-8 replaced); past
    ``timeout_s`` its whole group is killed (a child it left had outlived the caller) and
    :class:`subprocess.TimeoutExpired` raised. OSError when it cannot be started."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # one that left the group keeps a pipe open
            proc.communicate(timeout=2)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
