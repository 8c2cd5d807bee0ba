"""New lines of a starting server's log, taken at each readiness poll.

A local engine writes its log file itself: :class:`FileTap` reads what it gained. A container's log is
docker's: :class:`CommandTap` runs ``docker logs -f`` once and appends what it prints to the log file as it
comes. The readiness wait had instead rewritten the file from ``docker logs --tail 2000`` at every poll
(two a second: the whole tail re-read each time, and past 2,000 lines of start-up the phase reader's offset
pointed into a shifted file, skipping or repeating lines).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from llmdeck.util.interrupts import interrupts_held
from llmdeck.util.redact import redact_text

MAX_LINE = 1 << 20  # a line without end is taken as it is past this
QUIET_S = 0.3  # closing: the follower has caught up once its output pauses this long
CLOSE_LIMIT_S = 3.0  # closing: a follower that prints nothing (or never pauses) is waited on no longer
TAKE_CAP = 1 << 20  # what one take reads at most (redacted at ~2 MB/s): a poll is not held by a flood


class LogTap(Protocol):
    def take(self) -> list[str]:
        """The complete lines the log gained since the last take (without their line ends)."""

    def close(self) -> list[str]:
        """Stop; the lines it gained since the last take."""


class FileTap:
    """The lines a log file gains (the file a local engine writes)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.pending = path, 0, ""

    def take(self) -> list[str]:
        from llmdeck.engines.logfiles import feed_new_lines

        lines: list[str] = []
        self.offset, self.pending = feed_new_lines(self.path, self.offset, self.pending, lines.append)
        return lines

    def close(self) -> list[str]:
        return self.take()


class CommandTap:
    """A command's output (``docker logs -f NAME``: both streams, in order), appended to the log file
    (secrets redacted) as it comes; read without blocking, so a take never waits on a quiet container."""

    def __init__(self, argv: Sequence[str], path: Path) -> None:
        self.path, self.pending, self.seen, self.ended = path, b"", False, False
        self.proc = subprocess.Popen(  # its own group: a wrapper's children end with it (closed in one kill)
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)

    def take(self) -> list[str]:
        return self._keep(self._read()[0])

    def _read(self) -> tuple[list[bytes], int]:
        got, raw = 0, []
        while got < TAKE_CAP:
            try:
                chunk = os.read(self.fd, min(65536, TAKE_CAP - got))  # TAKE_CAP, not one read past it
            except BlockingIOError:
                break
            if not chunk:  # the container stopped: `docker logs -f` ends
                self.ended = True
                break
            got += len(chunk)
            *whole, self.pending = (self.pending + chunk).split(b"\n")
            while cut := self._cut(self.pending):
                whole, self.pending = [*whole, self.pending[:cut]], self.pending[cut:]
            raw += whole
        self.seen = self.seen or got > 0
        return raw, got

    def _cut(self, pending: bytes) -> int:
        """Where a line without end is cut (0: not yet): past :data:`MAX_LINE`, where it stands."""
        return len(pending) if len(pending) >= MAX_LINE else 0

    def _keep(self, raw: list[bytes]) -> list[str]:
        lines = [line.decode("utf-8", errors="replace") for line in raw]
        if lines:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(redact_text("\n".join(lines)) + "\n")
        return lines

    def close(self) -> list[str]:
        """Stop following, once it has caught up: what it printed is kept (a last line without end too).

        Caught up: its output has paused for a moment after it began (``docker logs -f`` prints what the
        container logged so far in one go); a follower that prints nothing is waited on a few seconds at
        most. A quick start had otherwise been done before the follower printed a line, its log empty.

        The follower is always reaped, its whole group killed: an interrupt while it catches up (a second
        Ctrl-C, a SIGTERM) had left `docker logs -f` running until the container went, and the reaping
        itself is shielded from another signal (:func:`~llmdeck.util.interrupts.interrupts_held`); one
        that came then is raised once it is done, unless an interrupt is on its way already."""
        held: list[int] = []
        try:
            rest = self._catch_up()
        finally:
            with interrupts_held("closing the log tap") as held:
                self._reap()
        if held:
            signal.raise_signal(held[0])
        return rest

    def _catch_up(self) -> list[str]:
        deadline, quiet_at, rest = time.monotonic() + CLOSE_LIMIT_S, None, []
        while not self.ended and time.monotonic() < deadline:
            raw, got = self._read()
            rest += self._keep(raw)
            if got:
                quiet_at = None
            elif self.seen:
                quiet_at = quiet_at or time.monotonic()
                if time.monotonic() - quiet_at >= QUIET_S:
                    break
            time.sleep(0.02 if got else 0.05)
        if self.pending:
            rest += self._keep([self.pending])
            self.pending = b""
        return rest

    def _reap(self) -> None:
        with contextlib.suppress(OSError):  # the group is gone already
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
