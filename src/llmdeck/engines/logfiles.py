"""Server log files: created 0600 with a redacted header, rotated, read from the end, followed.

A log holds what the engine printed, which can include the user's prompts and paths: it is the
user's own (0600), and llmdeck writes nothing secret into it (the header's argv is redacted).
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from llmdeck.util.redact import redact_argv

LOG_MODE = 0o600


def rotate_log(log_path: Path, keep: int = 3) -> None:
    """Keep the previous runs' logs as NAME.log.1 … NAME.log.<keep>."""
    if not log_path.exists():
        return
    _move_older_along(log_path, keep)
    log_path.rename(log_path.with_name(f"{log_path.name}.1"))


def _move_older_along(log_path: Path, keep: int) -> None:
    """NAME.log.1 … .<keep-1> renamed one up, NAME.log.<keep> dropped: NAME.log.1 is free."""
    for i in range(keep, 0, -1):
        src = log_path.with_name(f"{log_path.name}.{i}")
        if src.exists():
            if i == keep:
                src.unlink()
            else:
                src.rename(log_path.with_name(f"{log_path.name}.{i + 1}"))


def copy_truncate(log_path: Path, note: str, keep: int = 3) -> None:
    """The log of a running engine moved along without taking its file from it (logrotate's
    copytruncate): its content copied to NAME.log.1 (the older ones moved along), then the file emptied
    in place and ``note`` written at its start. The engine writes with O_APPEND (:func:`open_log`), so
    its next line lands at the new end; a line written between the copy and the truncation is lost.
    A copy that fails (a full disk) is removed and the log left whole (OSError raised)."""
    _move_older_along(log_path, keep)
    first = log_path.with_name(f"{log_path.name}.1")
    fd = os.open(first, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOG_MODE)
    try:
        with os.fdopen(fd, "wb") as dst, open(log_path, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError:
        first.unlink(missing_ok=True)
        raise
    append = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    try:
        os.ftruncate(append, 0)
        os.write(append, note.encode())
    finally:
        os.close(append)


def header_line(argv: Sequence[str]) -> str:
    """``# llmdeck: <time> starting: <argv>``, shell-quoted, secrets redacted."""
    return f"# llmdeck: {datetime.now(UTC).isoformat()} starting: {shlex.join(redact_argv(argv))}\n"


def note_stop(log_path: Path, who: str) -> None:
    """``# llmdeck: <time> stopping: <who> (pid <this process>)`` appended to a server's log before its
    engine is signalled: a start waiting for that engine then says who stopped it (it had said "exited
    before it was ready; no known cause"), and the log tells why the server ended
    (:func:`stopper` reads it back)."""
    note(log_path, f"stopping: {who} (pid {os.getpid()})")


def stopper(log_path: Path) -> tuple[str, int] | None:
    """Who stopped the server (the ``who`` of :func:`note_stop`) and the pid of the process that did,
    from the log's last note; None when none did, or the note has no pid."""
    said = who_stopped(log_path) or ""
    who, sep, pid = said.rpartition(" (pid ")
    if not sep or not pid.endswith(")") or not pid[:-1].isdigit():
        return None
    return who, int(pid[:-1])


def note(log_path: Path, text: str) -> None:
    """``# llmdeck: <time> <text>`` appended to a server's log. Never creates the log, never waits on
    a pipe there; a log that cannot be written is left as it is."""
    import contextlib

    line = f"# llmdeck: {datetime.now(UTC).isoformat()} {text}\n".encode()
    with contextlib.suppress(OSError):
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(log_path, flags)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, line)
        finally:
            os.close(fd)


def stopped_by(log_text: str) -> str | None:
    """Who stopped the server the log's last start began (its last :func:`note_stop`), or None."""
    who = None
    for line in log_text.splitlines():
        if line.startswith("# llmdeck: "):
            if " starting: " in line or " kept running: " in line:
                who = None  # an earlier start's stop is not this one's; a restart cut short stopped none
            elif " stopping: " in line:
                who = line.split(" stopping: ", 1)[1].strip()
    return who


def who_stopped(log_path: Path) -> str | None:
    """:func:`stopped_by` of the log's tail; None when none did, or the log cannot be read."""
    from llmdeck.errors import LlmdeckError

    try:
        return stopped_by(read_tail(log_path))
    except (LlmdeckError, OSError):
        return None


_LOG_HINT = "Move it away; llmdeck writes a new log file there when the server starts again."


def open_log(log_path: Path, argv: Sequence[str]) -> BinaryIO:
    """A new log file (0600, the folder 0700) opened for appending, the header written."""
    from llmdeck.util.localfile import ensure_dir

    ensure_dir(log_path.parent)  # the state root too, if missing: 0700, never 0777 under umask 000
    if not log_path.parent.is_symlink():  # a linked folder's mode is its owner's (a shared 1777 one)
        os.chmod(log_path.parent, 0o700)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_MODE)
    os.fchmod(fd, LOG_MODE)
    fh = os.fdopen(fd, "ab", buffering=0)
    fh.write(header_line(argv).encode())
    return fh


def read_tail(path: Path, max_bytes: int = 200_000) -> str:
    """The last ``max_bytes`` of a log ("" when there is none). A log path that is a folder, a pipe
    or a device is a UsageError naming it (opened without blocking, never read)."""
    from llmdeck.errors import UsageError
    from llmdeck.util.localfile import not_regular

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise UsageError(f"Cannot read the log {path}: {exc.strerror or exc}.", hint=_LOG_HINT) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UsageError(f"Cannot read the log {path}: {not_regular(path, mode).strerror}.", hint=_LOG_HINT)
    with os.fdopen(fd, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - max_bytes))
        return fh.read().decode("utf-8", errors="replace")


def feed_new_lines(path: Path, offset: int, pending: str, on_line: Callable[[str], None]) -> tuple[int, str]:
    """Call ``on_line`` for each complete new line after ``offset``; returns the new (offset, rest)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
    except FileNotFoundError:
        return offset, pending
    if not chunk:
        return offset, pending
    text = pending + chunk.decode("utf-8", errors="replace")
    *lines, rest = text.split("\n")
    for line in lines:
        on_line(line)
    return offset + len(chunk), rest


FOLLOW_READ = 1 << 20  # what `logs -f` reads at a time: a log that jumps by 1 GB is not read into memory


def _log_id(path: Path) -> tuple[int, int]:
    """The log's (inode, size); (0, 0) while there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return 0, 0
    return st.st_ino, st.st_size


def _read_at(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(FOLLOW_READ)
    except FileNotFoundError:  # moved away, not made again yet: wait for it as `tail -F` does
        return b""


def follow(path: Path, ended: Callable[[], bool] | None, pause_s: float = 0.5) -> Iterator[str]:
    """What the log at ``path`` gains, whole lines at a time (a secret or an escape sequence split
    across two reads is redacted / shown like any other by the caller), until ``ended()`` says the
    server is gone (None: until the caller stops). A new file (rotated by `up`: another inode) or a
    shorter one is read from its start; at most 1 MiB is read at a time, and a line that never ends
    is given as it is past 1 MiB. The log's end is taken now, at the call."""
    return _whole_lines(_gained(path, ended, pause_s, *_log_id(path)))


def follow_from_start(path: Path, ended: Callable[[], bool], pause_s: float = 0.3) -> Iterator[str]:
    """The log at ``path`` from its start, then what it gains, as it comes (part of a line too: a
    progress bar drawn with carriage returns shows as it is drawn), until ``ended()``. Moved along in
    place by the log keeper (shorter) or made anew (another inode), it is read from its start again
    (`up --attach` had kept its offset into the old file and printed nothing more, for weeks)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for chunk in _gained(path, ended, pause_s, _log_id(path)[0], 0):
        if text := decoder.decode(chunk):
            yield text
    if text := decoder.decode(b"", final=True):
        yield text


def _gained(
    path: Path, ended: Callable[[], bool] | None, pause_s: float, inode: int, offset: int
) -> Iterator[bytes]:
    """The bytes the log gains after ``offset`` of the file ``inode`` (from 0 of another or a shorter
    one), at most 1 MiB at a time, until ``ended()`` and nothing more is there."""
    while True:
        now_inode, size = _log_id(path)
        if now_inode != inode or size < offset:
            inode, offset = now_inode, 0
        chunk = _read_at(path, offset)
        if chunk:
            offset += len(chunk)
            yield chunk
            if len(chunk) == FOLLOW_READ:
                continue  # more is there: no pause
        elif ended is not None and ended():
            return
        time.sleep(pause_s)


def _whole_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """``chunks`` as whole lines (a line that never ends given as it is past 1 MiB)."""
    pending = b""
    for chunk in chunks:
        whole, nl, pending = (pending + chunk).rpartition(b"\n")
        if not nl and len(pending) >= FOLLOW_READ:
            whole, nl, pending = pending, b"\n", b""
        if nl:
            yield whole.decode("utf-8", errors="replace") + "\n"
    if pending:
        yield pending.decode("utf-8", errors="replace") + "\n"
