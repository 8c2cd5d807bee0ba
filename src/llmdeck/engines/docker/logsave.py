"""A container's log saved whole into its server's log file at a stop, before `docker rm` removes it.

What docker logged past the file's mark (:mod:`.logmark`: where the start-up copy ended) is read with
``docker logs -t --since`` one second before the mark (stdout and stderr are stamped by two readers, so
docker's order may run a few microseconds back), the lines up to the mark skipped by their place, the
rest spooled to a temporary file, redacted. The log file is then replaced by its old content and the
newest part of what was spooled that keeps it under the log bound of a local server
(:data:`~llmdeck.engines.logkeeper.MAX_LOG_BYTES`), with a line saying what was left out, and the mark
moved to docker's last line: a second save (a `down` tried again) adds nothing.

A log file without a mark (written by an older llmdeck) is rewritten from its first line and docker's
whole log, as the old ``docker logs --tail 2000`` rewrite did, whole now.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING

from llmdeck.engines.docker.logmark import Mark, MarkLock, Place, unstamp
from llmdeck.engines.logfiles import LOG_MODE
from llmdeck.engines.logkeeper import MAX_LOG_BYTES
from llmdeck.util.redact import redact_text

if TYPE_CHECKING:
    from llmdeck.engines.docker.cli import DockerCLI

SAVE_S = 300.0  # `docker logs` of 3 x 64 MiB takes seconds (a daemon silent for a minute is let go)
BATCH = 1 << 20  # lines redacted and written a MiB at a time
NOTES_ROOM = 512  # what the notes of a save take of the bound
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Spooled:
    """What :func:`_spool` kept of docker's output."""

    mark: Mark  # docker's last line
    found: bool  # the file's mark was among docker's lines (False: docker no longer had them)
    lines: int = 0
    bytes: int = 0
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=20))  # docker's error, when it fails


def save_rest(
    log_path: Path,
    name: str,
    *,
    header: str,
    cli: DockerCLI,
    limit_s: float = SAVE_S,
    max_bytes: int = MAX_LOG_BYTES,
) -> int:
    """Docker's log of server ``name`` past the file's mark saved into ``log_path`` (``header``: its
    first line, for a file without a mark); the number of lines saved. DockerError when docker cannot
    give the log (nothing is written then)."""
    from llmdeck.engines.docker.output import docker_error

    with MarkLock(log_path) as lock:
        if lock.forgotten():  # a `down` at the same time saved it whole and removed the container
            return 0
        mark = lock.read()
        since = _before(mark.ts) if mark is not None and mark.ts else None
        out = cli.stamped_logs(name, since=since, limit_s=limit_s)
        with tempfile.TemporaryFile(dir=log_path.parent) as spool:  # 0600, gone with its handle
            try:
                got = _spool(out.lines(), mark, spool)
            finally:
                rc = out.close()
            if rc != 0 and not out.timed_out:
                raise docker_error(out.argv, rc, "\n".join(got.tail))
            _replace(log_path, header if mark is None else None, spool, got, out.timed_out, max_bytes)
        lock.write(got.mark)
    return got.lines


def _before(ts: str) -> str:
    """Docker's timestamp ``ts`` less one second, in its own form."""
    at = datetime.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC) - timedelta(seconds=1)
    return at.strftime("%Y-%m-%dT%H:%M:%S") + ts[19:]


def _spool(lines: Iterator[bytes], mark: Mark | None, spool: IO[bytes]) -> Spooled:
    """Docker's lines after ``mark`` (all of them when None or empty) into ``spool``, redacted. Lines
    stamped after the mark are kept until the mark is met (docker no longer had it: they are what it
    has); met, what came before is dropped."""
    got = Spooled(mark=mark or Mark(), found=mark is None or not mark.ts)
    pos, taking, size = Place(), got.found, 0
    batch: list[bytes] = []
    for raw in lines:
        ts, text = unstamp(raw)
        pos.step(ts)
        if not ts:  # docker's own words (an error) have no stamp
            got.tail.append(raw[:2000].decode("utf-8", errors="replace"))
        if not got.found and pos.mark == mark:
            got.found, taking, batch, size = True, False, [], 0
            spool.seek(0)
            spool.truncate()
            got.lines = got.bytes = 0
            continue
        taking = (got.found or (mark is not None and ts > mark.ts)) if ts else taking
        if taking:
            batch.append(text)
            size += len(text)
            if size >= BATCH:
                _write(spool, batch, got)
                batch, size = [], 0
    _write(spool, batch, got)
    got.mark = pos.mark if pos.mark.ts else got.mark
    return got


def _write(spool: IO[bytes], batch: list[bytes], got: Spooled) -> None:
    if batch:
        text = "\n".join(line.decode("utf-8", errors="replace") for line in batch)
        data = (redact_text(text) + "\n").encode("utf-8")
        spool.write(data)
        got.lines += len(batch)
        got.bytes += len(data)


def _replace(
    log_path: Path, header: str | None, spool: IO[bytes], got: Spooled, timed_out: bool, max_bytes: int
) -> None:
    """The log file replaced (atomically) by its content (``header`` only when given) and the newest
    part of ``spool`` that keeps it under ``max_bytes`` (half of it at least), with notes."""
    had = len(header.encode()) if header is not None else _size(log_path)
    budget = max(max_bytes - had - NOTES_ROOM, max_bytes // 2)
    cut_at, cut_lines = _cut(spool, got.bytes, budget)
    tmp = log_path.with_name(f".{log_path.name}.{os.getpid()}.saving")
    fd = os.open(tmp, _NEW, LOG_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            _copy_head(out, log_path, header)
            for note in _notes(got, cut_lines, got.bytes - cut_at if cut_at else 0, max_bytes):
                out.write(note.encode())
            spool.seek(cut_at)
            shutil.copyfileobj(spool, out, BATCH)
            if timed_out:
                out.write(_note("`docker logs` gave no more in time: what it gave is above").encode())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, log_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _cut(spool: IO[bytes], size: int, budget: int) -> tuple[int, int]:
    """Where the kept part of the spool starts (a line's start) and how many lines come before it."""
    if size <= budget:
        return 0, 0
    spool.seek(size - budget)
    spool.readline()
    at = spool.tell()
    spool.seek(0)
    lines, left = 0, at
    while left > 0:
        chunk = spool.read(min(BATCH, left))
        lines += chunk.count(b"\n")
        left -= len(chunk)
    return at, lines


def _copy_head(out: IO[bytes], log_path: Path, header: str | None) -> None:
    """The log's content so far (``header`` instead, when given), ending in a line end."""
    if header is not None:
        out.write(header.encode())
        return
    last = b"\n"
    with contextlib.suppress(FileNotFoundError), open(log_path, "rb") as src:
        while chunk := src.read(BATCH):
            out.write(chunk)
            last = chunk[-1:]
    if last != b"\n":
        out.write(b"\n")


def _notes(got: Spooled, cut_lines: int, kept: int, max_bytes: int) -> list[str]:
    notes = []
    if not got.found:
        notes.append(_note("docker no longer had the lines that followed (it keeps 3 x 64 MiB of them)"))
    if cut_lines:
        bound = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes} bytes"
        notes.append(
            _note(
                f"{cut_lines:,} lines the container logged are left out here (a log is kept under "
                f"{bound}): its last {kept / (1 << 20):.1f} MiB follow"
            )
        )
    return notes


def _note(text: str) -> str:
    return f"# llmdeck: {datetime.now(UTC).isoformat()} {text}\n"
