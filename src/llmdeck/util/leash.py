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

``hold_command(key, argv)`` is the same for what no signal reaches: a container (its processes are the
docker daemon's children). Its watcher runs ``argv`` (``docker stop -t 20 ID``, bounded) when this
process dies; ``let_go(key)`` ends it as above.

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
from collections.abc import Callable

from llmdeck.util.procgroup import group_alive, signal_group

POLL_S = 0.5
RUN_LIMIT_S = 120.0  # the release command (`docker stop -t 20 ID`) may take this long, then is killed
_HELD: dict[int | str, tuple[int, subprocess.Popen[bytes]]] = {}  # key → (write end, its watcher)


def hold(pgid: int, grace_s: float) -> None:
    """Start the watcher of the group ``pgid`` (best effort: a watcher that cannot start leaves the
    group as it was, stopped by the command's own handlers)."""
    _spawn(pgid, lambda read: [str(read), str(pgid), f"{grace_s:g}"])


def hold_command(key: str, argv: list[str]) -> None:
    """Start a watcher that runs ``argv`` when this process dies (``key``: what :func:`let_go` names)."""
    _spawn(key, lambda read: [str(read), "--run", *argv])


def _spawn(key: int | str, args: Callable[[int], list[str]]) -> None:
    _collect()
    read, write = os.pipe()
    argv = [sys.executable, "-m", "llmdeck.util.leash", *args(read)]
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
    _HELD[key] = (write, watcher)


def let_go(key: int | str) -> None:
    """The group ``key`` (or what :func:`hold_command` named so) was stopped, or is to outlive this
    process: its watcher exits now."""
    held = _HELD.pop(key, None)
    if held is not None:
        with contextlib.suppress(OSError):
            os.write(held[0], b"x")
        os.close(held[0])
    _collect()


def _collect() -> None:
    """Reap watchers that exited (their group ended) and close their pipes."""
    for key, (write, watcher) in list(_HELD.items()):
        if watcher.poll() is not None:
            os.close(write)
            del _HELD[key]


def watch(fd: int, pgid: int, grace_s: float) -> None:
    """The watcher: until the group is empty, a byte (let go) ends it, end-of-file stops the group."""
    while group_alive(pgid):
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if not ready:
            continue
        if not os.read(fd, 1):  # the command died: nothing else will stop its group
            stop_group(pgid, grace_s)
        return


def watch_command(fd: int, argv: list[str]) -> None:
    """The watcher of a command: a byte (let go) ends it, end-of-file runs ``argv`` (bounded)."""
    if not os.read(fd, 1):  # blocks until let go (a byte) or this process's death (end-of-file)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=RUN_LIMIT_S,
                check=False,
            )


def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM to the group, SIGKILL to what is left of it after ``grace_s``."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.1)
    signal_group(pgid, signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[2] == "--run":
        watch_command(int(sys.argv[1]), sys.argv[3:])
    else:
        watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
