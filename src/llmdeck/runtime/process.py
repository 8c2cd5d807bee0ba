"""Process helpers: is a pid alive and ours, stop a process group gracefully then hard."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil


def pid_alive(pid: int | None) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop_process_group(pid: int, *, grace_s: float = 20.0) -> str:
    """SIGTERM the process group led by ``pid``, wait ``grace_s``, then SIGKILL.

    Returns "stopped", "killed" or "gone" (it had already exited).
    """
    if not pid_alive(pid):
        _reap(pid)
        return "gone"
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return "gone"
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            _kill_leftovers(pgid)
            return "stopped"
        time.sleep(0.2)
    _signal_group(pgid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    return "killed"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_leftovers(pgid: int) -> None:
    """vLLM's engine core is a child process; make sure none of the group outlives the server."""
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid:
                proc.kill()
        except (ProcessLookupError, psutil.NoSuchProcess, psutil.AccessDenied, PermissionError):
            continue


def _reap(pid: int) -> None:
    """Collect our own exited child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
