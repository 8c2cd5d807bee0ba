"""A leash: what a foreground command started in a session of its own dies with the command.

Some children of a foreground command run in their own session, so that a limit or Ctrl-C stops the
whole group: an eval's agent and its hidden tests, a tune's (or quickstart's) server. On Ctrl-C, SIGTERM
and SIGHUP the command stops them itself; killed outright (SIGKILL, the OOM killer) it runs no handler,
and the group, out of reach of any signal to the command's own group, had gone on with no one to stop
it: an agent still editing files, a trial vLLM holding the GPU.

``hold(pgid, grace_s)`` starts a watcher beside the group (``python -m llmdeck.util.leash FD PGID
GRACE``, in a session of its own too, so a signal to the command's group does not end it first). It
holds the read end of a pipe whose write end only this process holds. ``let_go(pgid)`` (the group was
stopped, or is to live on) writes one byte: the watcher exits. When this process dies, the kernel closes
the write end: the watcher reads end-of-file and stops the group as ``llmdeck down`` does — SIGTERM,
SIGKILL after ``grace_s``. It also exits by itself once the group is empty. Only the moment between the
child's start and the watcher's is not covered.

Not PR_SET_PDEATHSIG: it reaches the one child only (an agent's tool processes, vLLM's engine core
would live on), and it fires when the thread that started the child ends, not the process.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

from llmdeck.util.procgroup import group_alive, signal_group

POLL_S = 0.5
_HELD: dict[int, tuple[int, subprocess.Popen[bytes]]] = {}  # pgid → (write end, its watcher)


def hold(pgid: int, grace_s: float) -> None:
    """Start the watcher of the group ``pgid`` (best effort: a watcher that cannot start leaves the
    group as it was, stopped by the command's own handlers)."""
    _collect()
    read, write = os.pipe()
    argv = [sys.executable, "-m", "llmdeck.util.leash", str(read), str(pgid), f"{grace_s:g}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        watcher = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(read,),
            env=env,
            start_new_session=True,
        )
    except OSError:
        os.close(write)
        return
    finally:
        os.close(read)
    _HELD[pgid] = (write, watcher)


def let_go(pgid: int) -> None:
    """The group ``pgid`` was stopped (or is to outlive this process): its watcher exits now."""
    held = _HELD.pop(pgid, None)
    if held is not None:
        with contextlib.suppress(OSError):
            os.write(held[0], b"x")
        os.close(held[0])
    _collect()


def _collect() -> None:
    """Reap watchers that exited (their group ended) and close their pipes."""
    for pgid, (write, watcher) in list(_HELD.items()):
        if watcher.poll() is not None:
            os.close(write)
            del _HELD[pgid]


def watch(fd: int, pgid: int, grace_s: float) -> None:
    """The watcher: until the group is empty, a byte (let go) ends it, end-of-file stops the group."""
    while group_alive(pgid):
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if not ready:
            continue
        if not os.read(fd, 1):  # the command died: nothing else will stop its group
            stop_group(pgid, grace_s)
        return


def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM to the group, SIGKILL to what is left of it after ``grace_s``."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.1)
    signal_group(pgid, signal.SIGKILL)


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
