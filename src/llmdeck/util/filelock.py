"""One command at a time on a piece of state: an exclusive ``flock`` on a lock file beside it.

Two `gateway up` run at once had both checked "no gateway recorded", both spawned one, and the record
named the one that lost the port while the other served on, unrecorded. Held across check, start and
record, the lock makes the second wait for the first and then see its record. Bounded: a holder that
never lets go is named after ``timeout_s``, not waited on forever. The lock goes with the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from llmdeck.errors import OperationError, UsageError
from llmdeck.util.localfile import ensure_dir


@contextlib.contextmanager
def exclusive(path: Path, *, timeout_s: float, what: str) -> Iterator[None]:
    """Hold ``path`` (made if missing) locked for the block; OperationError after ``timeout_s``."""
    ensure_dir(path.parent)
    with open(path, "a", encoding="utf-8") as fh:
        _wait_for(fh.fileno(), path, timeout_s, what)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _wait_for(fd: int, path: Path, timeout_s: float, what: str) -> None:
    """``fd`` flock-ed exclusively, retried until ``timeout_s``; OperationError then."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise OperationError(
                    f"Another {what} has held {path} for {timeout_s:g} s.",
                    hint="Wait for it to finish (or stop it), then run this again.",
                ) from None
            time.sleep(0.1)


@contextlib.contextmanager
def folder_lock(folder: Path, *, timeout_s: float, what: str) -> Iterator[None]:
    """Hold ``folder`` itself flock-ed for a read-change-write of a file in it: two `keys create` (or
    two `connect`) at once had each read the file, added their part and written it, the last one's
    write dropping the other's part although both said done. No lock file is left beside the user's
    file. A folder that cannot be opened or flock-ed (no read bit, a file system without flock) is
    written unlocked, as before. OperationError after ``timeout_s``."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):  # EBADF, ENOLCK, EINVAL: no flock here (OperationError is none)
            _wait_for(fd, folder, timeout_s, what)
        yield
    finally:
        os.close(fd)  # the lock goes with the last descriptor


@contextlib.contextmanager
def sole_writer(
    lock_dir: Path | None, target: Path | None, what: str, *, refusal: UsageError | None = None
) -> Iterator[None]:
    """Refuse a second run writing ``target`` (a result file or folder) while one does: two benches given
    one --out had each written it, the last one's result replacing the other's. The lock lives in
    ``lock_dir`` (the state folder's locks/, nothing beside the user's file), named by the target's
    absolute path, and is removed when the run ends (one per result would pile up); it goes with the
    process. UsageError (exit 2) at once when taken: ``refusal``, or one naming ``target``."""
    if lock_dir is None or target is None:
        yield
        return
    import hashlib

    key = hashlib.sha256(os.path.abspath(target).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    path = ensure_dir(lock_dir) / f"{key}.lock"
    fh = _locked(path)
    if fh is None:
        raise refusal or UsageError(
            f"Another {what} is writing {target} now.",
            hint="Wait for it to finish, or give this run another --out.",
        )
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still held: a run that opens it now finds it gone and makes its own
        fh.close()


def _locked(path: Path) -> IO[str] | None:
    """``path`` opened and locked (the file that is there now: one unlinked by its last holder between
    our open and our lock is not it, so try again), or None while another holds it."""
    while True:
        fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held past this function
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fh
        fh.close()
