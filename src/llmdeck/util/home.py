"""The user's home folder, from a HOME that may be unusable."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """HOME when it is an absolute path; else (unset, empty, relative, ``~``) the user's home from the
    password database, as Python takes it when HOME is unset: ``HOME=~`` had made every command an
    internal error, a relative HOME put the records under whatever folder a command ran in. "/" when
    the password database has no entry for the user either (the error then names that folder)."""
    value = os.environ.get("HOME", "")
    if os.path.isabs(value):
        return Path(value)
    import pwd

    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir or "/")
    except KeyError:
        return Path("/")


def settle_home() -> None:
    """A set HOME that is not an absolute path (``~``, relative, empty) replaced by :func:`home`, for this
    process and the engines it starts: every ``Path.home()`` (the HF cache, doctor's checks) had been an
    internal error for ``HOME=~`` ("Could not determine home directory"), or a folder under whatever
    folder the command ran in for a relative one."""
    value = os.environ.get("HOME")
    if value is not None and not os.path.isabs(value):
        os.environ["HOME"] = str(home())
