"""Where a docker server's log file ends in docker's own log of the container: its mark.

A docker server's log file holds docker's log of the container in two parts: the start-up, appended by
the readiness tap (``docker logs -f -t``) as it comes, and the rest, saved by ``down``
(:mod:`.logsave`) before ``docker rm`` takes docker's copy with the container. The file's
:class:`Mark` (docker's timestamp of the last line copied, and how many lines so far had that same
timestamp) is kept beside it, in ``NAME.log.mark`` with the log's inode, under a lock that every writer
of docker's lines takes: each line is copied once, whoever copies it. The tap copies at most
:data:`TAP_BYTES` (half a log's bound: `down` saves the rest, bounded); the mark goes with the server's
record (:func:`forget`).

Why docker's timestamps (``-t``) rather than the clock time the tap stopped: the tap stops at a point of
docker's output, not at a time; lines logged between its last read and its end would be lost (``--since``
that time) or copied twice (``--since`` its start). The timestamp docker gave the last line copied names
that point exactly. Docker prints its timestamp again inside a line longer than 16 KiB (it keeps such a
line in 16 KiB parts, each stamped: docker/cli#4941, moby#37681); :func:`unstamp` takes those out.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llmdeck.engines.logfiles import LOG_MODE, note
from llmdeck.engines.logkeeper import MAX_LOG_BYTES
from llmdeck.engines.logtap import MAX_LINE, CommandTap
from llmdeck.util.redact import redact_text

STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ")  # docker's RFC3339NanoFixed, UTC
STAMP_LEN = 31  # "2026-11-29T20:35:11.123456789Z "
TS = re.compile(STAMP.pattern[:-1].decode())  # a mark's timestamp: docker's, without the space
PART = 16 * 1024  # docker keeps a longer line in parts of this size, each with its timestamp
LONG_CUT = -(-MAX_LINE // (PART + STAMP_LEN)) * (PART + STAMP_LEN)  # a docker stamp of a long line
# what the tap copies of a start-up at most: half the bound of a log, the save's half left to `down`
TAP_BYTES = MAX_LOG_BYTES // 2 - 1024
RECENT = 256  # the stamps a Place counts lines for


def unstamp(raw: bytes) -> tuple[str, bytes]:
    """A line of ``docker logs -t``: (docker's timestamp, the line the container wrote); ("", raw) for
    a line without one (the rest of a line cut past the tap's line limit)."""
    if not STAMP.match(raw):
        return "", raw
    ts, rest = raw[: STAMP_LEN - 1].decode("ascii"), raw[STAMP_LEN:]
    parts, at = [], 0
    while len(rest) - at > PART and STAMP.match(rest, at + PART):
        parts.append(rest[at : at + PART])
        at += PART + STAMP_LEN
    parts.append(rest[at:])
    return ts, b"".join(parts)


def stamped_cut(pending: bytes) -> int:
    """Where a line of ``docker logs -t`` without end is cut (0: not yet). Past :data:`MAX_LINE`, at
    docker's stamp of a part (:data:`LONG_CUT` bytes in: the same place whatever the reads were, for
    the tap and the save alike), so that the rest starts with its stamp and :func:`unstamp` takes the
    stamps out of it too (cut where it stood, docker's stamps were left inside a line past 1 MiB)."""
    if len(pending) < MAX_LINE:
        return 0
    if STAMP.match(pending) and len(pending) < LONG_CUT + STAMP_LEN:
        return 0  # the stamp at the cut is not read yet (a few KiB more)
    if STAMP.match(pending) and STAMP.match(pending, LONG_CUT):
        return LONG_CUT
    return len(pending)


@dataclass(frozen=True)
class Mark:
    """The last line copied: docker's timestamp of it ("" before any) and its place among the lines that
    share that timestamp (1 for the first), counted in docker's order whether in a row or not."""

    ts: str = ""
    n: int = 0


class Place:
    """Where a reader of docker's lines stands: the :class:`Mark` of the last stamped line.

    Every line with a stamp is counted, not only a run of them: docker stamps stdout and stderr with two
    readers, so a line of the other stream can come between two lines of the same nanosecond (a burst);
    "the Nth in a row" then named two lines, and a save that met the first copied the lines between
    twice. Counts are kept for the :data:`RECENT` stamps seen last (docker's order runs back by
    microseconds); a save, reading from a second before the mark, sees every line with its stamp."""

    def __init__(self, mark: Mark | None = None) -> None:
        self.mark = mark or Mark()
        self.counts: dict[str, int] = {self.mark.ts: self.mark.n} if self.mark.ts else {}

    def step(self, ts: str) -> Mark:
        """The mark once a line stamped ``ts`` is read too (a line without a stamp moves nothing)."""
        if ts:
            n = self.counts.pop(ts, 0) + 1  # to the end: the least recently seen stamp goes first
            self.counts[ts] = n
            if len(self.counts) > RECENT:
                del self.counts[next(iter(self.counts))]
            self.mark = Mark(ts, n)
        return self.mark


def mark_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".mark")


class MarkLock:
    """The mark of ``log_path``, read and written under an exclusive lock held for the ``with`` block.
    ``create``: make the mark file when there is none (FileNotFoundError otherwise)."""

    def __init__(self, log_path: Path, *, create: bool = True) -> None:
        self.log_path = log_path
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        self.fd = os.open(mark_path(log_path), flags, LOG_MODE)

    def __enter__(self) -> MarkLock:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # the lock goes with it

    def forgotten(self) -> bool:
        """Whether the mark was removed (:func:`forget`) while this lock was awaited: its server's stop
        is over, its log saved."""
        try:
            return os.fstat(self.fd).st_ino != os.stat(mark_path(self.log_path)).st_ino
        except FileNotFoundError:
            return True

    def read(self) -> Mark | None:
        """The mark of the log file now at ``log_path``; None when there is none for it (no mark, the
        mark of an earlier file, one that cannot be read, one whose timestamp is not docker's: a
        torn or edited file had made `down` fail on the ``--since`` it computes from it)."""
        try:
            os.lseek(self.fd, 0, os.SEEK_SET)
            data = json.loads(os.read(self.fd, 4096) or b"null")
            if data["inode"] != os.stat(self.log_path).st_ino:
                return None
            ts, n = data["ts"], data["n"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if not (isinstance(ts, str) and (ts == "" or TS.fullmatch(ts)) and type(n) is int and n >= 0):
            return None
        return Mark(ts, n)

    def write(self, mark: Mark) -> None:
        data = {"inode": os.stat(self.log_path).st_ino, "ts": mark.ts, "n": mark.n}
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(data).encode(), 0)


def begin(log_path: Path, header: str) -> Mark:
    """A new log file (``header`` only) whose copy of docker's log is empty: its mark."""
    from llmdeck.util.atomic import atomic_write_text

    with MarkLock(log_path) as lock:
        atomic_write_text(log_path, header, secret=True)
        lock.write(Mark())
    return Mark()


def forget(log_path: Path) -> None:
    """The mark of ``log_path`` removed (its server's record goes: no copy of docker's log follows).
    A tap still following takes its absence as the end of its copy. One that is not a file (a folder
    in its place) is left as it is: the server is stopped all the same."""
    with contextlib.suppress(OSError), MarkLock(log_path, create=False):
        mark_path(log_path).unlink()


def append_lines(
    log_path: Path, lines: Sequence[tuple[str, bytes]], at: Place, *, max_bytes: int = TAP_BYTES
) -> Mark | None:
    """``lines`` (stamped, in docker's order) appended to the log (redacted) if the file's copy still
    ends at ``at`` (moved along them); the new mark, or None when the caller copies no more: another
    command copied docker's log since (a `down` saved it while the start was awaited), the mark went
    with the record, or the file would pass ``max_bytes`` (the rest is then left to the save, which
    bounds it: the tap's copy had grown without bound through a start-up that logged in a loop)."""
    try:
        lock = MarkLock(log_path, create=False)  # a mark removed with its record is not made again
    except FileNotFoundError:
        return None
    with lock:
        if lock.read() != at.mark:
            return None
        if lines:
            text = redact_text("\n".join(line.decode("utf-8", errors="replace") for _, line in lines))
            data = (text + "\n").encode("utf-8")
            if os.stat(log_path).st_size + len(data) > max_bytes:
                note(log_path, f"the start-up's log passed {_size(max_bytes)}: the rest is saved by `down`")
                return None
            with open(log_path, "ab") as fh:
                fh.write(data)
            for ts, _ in lines:
                at.step(ts)
            lock.write(at.mark)
    return at.mark


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n:,} bytes"


class StampedTap(CommandTap):
    """``docker logs -f -t``: each line appended once, its stamp taken off, the mark moved along; the
    caller gets the lines as the container wrote them."""

    def __init__(self, argv: Sequence[str], path: Path, mark: Mark) -> None:
        super().__init__(argv, path)
        self.at, self.copying = Place(mark), True

    def _cut(self, pending: bytes) -> int:
        return stamped_cut(pending)

    def _keep(self, raw: list[bytes]) -> list[str]:
        lines = [unstamp(line) for line in raw]
        if self.copying and lines:
            self.copying = append_lines(self.path, lines, self.at) is not None
        return [text.decode("utf-8", errors="replace") for _, text in lines]
