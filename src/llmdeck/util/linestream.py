"""Run a command and hand its output on line by line as it comes, for at most a given time.

For long commands whose progress the user should see (``docker pull`` of a 20 GB image): the lines
reach ``on_line`` as they are printed, the whole run is bounded (the command is killed at the
deadline, ``subprocess.TimeoutExpired`` raised), and Ctrl-C or any error stops it too. A line without
end is cut: the memory held is bounded whatever the command prints.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence

MAX_LINE = 64 * 1024  # bytes kept of one line
TAIL_LINES = 20  # lines kept for the error message


def stream_lines(
    argv: Sequence[str],
    on_line: Callable[[str], None],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run ``argv`` (stdout and stderr as one stream); (its exit code, its last lines)."""
    proc = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        _pump(proc.stdout.fileno(), deadline, tail, on_line, argv, timeout_s)
        rc = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return rc, "\n".join(tail)


def _pump(
    fd: int,
    deadline: float,
    tail: deque[str],
    on_line: Callable[[str], None],
    argv: Sequence[str],
    timeout_s: float,
) -> None:
    """Read until end-of-file, each whole line to ``on_line``; TimeoutExpired at the deadline."""
    pending = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(list(argv), timeout_s)
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        pending = pending[-MAX_LINE:]
        for raw in lines:
            text = raw[:MAX_LINE].decode("utf-8", errors="replace").rstrip("\r")
            tail.append(text)
            on_line(text)
    if pending:
        text = pending.decode("utf-8", errors="replace")
        tail.append(text)
        on_line(text)


def follow_output(argv: Sequence[str], *, max_line: int = 1 << 20) -> Iterator[str]:
    """Run ``argv`` (stdout and stderr as one stream, in the order written) and yield what it prints,
    whole lines at a time (a line without end is given as it is past ``max_line`` bytes), until it
    exits. Closing the generator (the caller stops, Ctrl-C) kills the command. No time limit: for
    following (``docker logs -f``), which the user ends."""
    proc = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    pending = b""
    try:
        while chunk := os.read(proc.stdout.fileno(), 65536):
            whole, nl, pending = (pending + chunk).rpartition(b"\n")
            if not nl and len(pending) >= max_line:
                whole, nl, pending = pending, b"\n", b""
            if nl:
                yield whole.decode("utf-8", errors="replace") + "\n"
        if pending:
            yield pending.decode("utf-8", errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
