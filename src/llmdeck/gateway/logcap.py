"""The gateway's log kept bounded while it runs (``python -m llmdeck.gateway.serve --log FILE``).

The gateway writes an access-log line per request (~140 bytes) for weeks; ``gateway up`` rotated the
log only at a start. Past :data:`MAX_LOG_BYTES` the log is moved along as ``up`` moves it
(gateway.log.1 … .3, the oldest dropped) and a new one takes its place on the process's stdout and
stderr (``dup2``: a traceback printed to stderr lands in it too), so the logs take at most four times
:data:`MAX_LOG_BYTES`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from llmdeck.engines.logfiles import LOG_MODE, rotate_log
from llmdeck.engines.logkeeper import MAX_LOG_BYTES  # one bound for the engines' logs and the gateway's


class CappedLog(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes records to ``fds[0]``; once that file is past ``max_bytes`` it is rotated and a new file
    at ``path`` is put on every fd of ``fds`` (stdout and stderr)."""

    def __init__(self, path: Path, max_bytes: int = MAX_LOG_BYTES, fds: Sequence[int] = (1, 2)) -> None:
        super().__init__(open(fds[0], "w", encoding="utf-8", errors="backslashreplace", closefd=False))  # noqa: SIM115
        self.path, self.max_bytes, self.fds = Path(path), max_bytes, tuple(fds)
        self._limit = max_bytes

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        try:
            if os.fstat(self.fds[0]).st_size > self._limit:
                self._rotate()
        except OSError as exc:  # a log that cannot be moved keeps growing; tried again past another cap
            self._limit += self.max_bytes
            self.stream.write(f"# llmdeck: the log could not be rotated ({exc.strerror or exc})\n")

    def _rotate(self) -> None:
        self.flush()
        rotate_log(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_MODE)
        try:
            os.fchmod(fd, LOG_MODE)
            note = f"# llmdeck: {datetime.now(UTC).isoformat()} continued: the log before this one is "
            os.write(fd, f"{note}{self.path.name}.1 (rotated past {self.max_bytes >> 20} MiB)\n".encode())
            for target in self.fds:
                os.dup2(fd, target)
        finally:
            os.close(fd)
        self._limit = self.max_bytes
