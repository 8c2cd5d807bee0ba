"""The standard streams and terminal variables as a command finds them, made safe before it runs.

- A closed stdout (``llmdeck status --json >&-``): Python leaves ``sys.stdout`` None, and every
  ``--json`` command, ``logs`` and the error path after it had ended in an internal error with a
  traceback (rich, meanwhile, dropped tables silently and exit 0, a new key's secret with them). It
  becomes a stream whose every write fails with EBADF, which the CLI reports as a failed operation.
  A closed stderr becomes a stream that drops what it is given, as rich does: click had printed its
  usage errors to stdout instead, into the JSON a script reads.
- A stdout whose encoding cannot write non-ASCII (``PYTHONIOENCODING=ascii``; ``LC_ALL=C`` with
  ``PYTHONUTF8=0``): a model name, a path or the "…" of a cut table cell had been an internal error
  (UnicodeEncodeError). Such characters are written as ``\\xNN`` escapes; JSON as ``\\uNNNN``
  (:func:`writes_unicode`), so the document stays exact.
- ``COLUMNS=0``: rich took it as a width of 0 columns and printed nothing at all (tables, --help),
  with exit 0. It is ignored, as a value that is not a number is.
- A HOME that is not an absolute path (``HOME=~``, a relative one) becomes the user's home
  (:func:`llmdeck.util.home.settle_home`).
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import sys
from typing import Any

from llmdeck.util.home import settle_home

CLOSED = "<closed stream>"  # the filename of the OSError a write to a stand-in raises (failures.py)


class ClosedStream(io.TextIOBase):
    """Stands in for a standard stream whose file descriptor is closed."""

    encoding = "utf-8"  # io.TextIOBase has no encoding of its own (None)

    def __init__(self, name: str, *, fail: bool) -> None:
        self.name = name
        self._fail = fail

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: Any) -> int:
        if self._fail:
            raise OSError(errno.EBADF, f"{self.name} is closed", CLOSED)  # as the OS says it, marked
        return len(text)


def guard_streams() -> None:
    """Put the stand-ins in place and make stdout write what its encoding cannot (module docstring)."""
    if sys.stdout is None:
        sys.stdout = ClosedStream("stdout", fail=True)
    if sys.stderr is None:
        sys.stderr = ClosedStream("stderr", fail=False)
    if not writes_unicode(sys.stdout) and isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    settle_home()
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) == 0:
        del os.environ["COLUMNS"]


def writes_unicode(stream: Any) -> bool:
    """Whether ``stream`` encodes every character (a UTF codec); True when it names none."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False
