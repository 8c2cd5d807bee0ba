"""``docker logs -t`` for a save (:mod:`.logsave`): its output line by line as it comes, bounded in time.

:class:`LogRun` runs the real client (both streams in one pipe, in the order written; stopped at its
limit, what it printed kept); :class:`LogAnswer` stands for it where :class:`~.cli.DockerCLI` has an
injected runner (tests), from that runner's whole answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Protocol

from llmdeck.engines.docker.logmark import stamped_cut

READ = 1 << 20


class LogLines(Protocol):
    argv: list[str]
    timed_out: bool

    def lines(self) -> Iterator[bytes]:
        """The output's lines (without their ends; a line past MAX_LINE given in parts)."""

    def close(self) -> int:
        """Once the lines are read (or the reader stopped): the exit code."""


class LogRun:
    """Stopped once it has run ``limit_s``, or printed nothing for ``idle_s`` (a hung daemon)."""

    def __init__(self, argv: Sequence[str], limit_s: float, idle_s: float = 60.0) -> None:
        self.argv, self.timed_out = list(argv), False
        self.proc = subprocess.Popen(  # its own group: a wrapper's children end with it (their pipe too)
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.last, self.done = time.monotonic(), threading.Event()
        deadline = self.last + limit_s
        threading.Thread(target=self._watch, args=(deadline, idle_s), daemon=True).start()

    def _watch(self, deadline: float, idle_s: float) -> None:
        while not self.done.wait(min(1.0, idle_s)):
            now = time.monotonic()
            if now > deadline or now - self.last > idle_s:
                self.timed_out = True
                self._kill()
                return

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def lines(self) -> Iterator[bytes]:
        assert self.proc.stdout is not None
        pending = b""
        while chunk := os.read(self.proc.stdout.fileno(), READ):
            self.last = time.monotonic()
            *whole, pending = (pending + chunk).split(b"\n")
            yield from whole
            while cut := stamped_cut(pending):  # a line past MAX_LINE: at one of docker's stamps
                yield pending[:cut]
                pending = pending[cut:]
        if pending:
            yield pending

    def close(self) -> int:
        self.done.set()
        if self.proc.poll() is None:
            self._kill()
        rc = self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return rc


class LogAnswer:
    def __init__(self, argv: Sequence[str], rc: int, text: str) -> None:
        self.argv, self.rc, self.text, self.timed_out = list(argv), rc, text, False

    def lines(self) -> Iterator[bytes]:
        data = self.text.encode("utf-8", errors="replace")
        yield from data.removesuffix(b"\n").split(b"\n") if data else []

    def close(self) -> int:
        return self.rc
