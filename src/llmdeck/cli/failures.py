"""Exceptions that reach the CLI unmapped but whose meaning is known: each becomes its llmdeck error.

Everything else that reaches the CLI is a bug (an internal error, one line, the traceback under
LLMDECK_DEBUG=1).
"""

from __future__ import annotations

import errno
import os
from typing import Any


def known_failure(exc: Exception) -> Any:
    """The llmdeck error for an exception that reached the CLI unmapped but whose meaning is known, or
    None: a peer that broke off (a failed operation), or a path with a name longer than the file system
    takes (bad input: pathlib's exists() and is_dir() raise ENAMETOOLONG where they return False for
    a missing file, and every command that looks at a path it was given had been an internal error), or
    a full disk where no file was named (stdout redirected to it: files are written through util.atomic),
    or a closed stdout, or a working folder that was deleted."""
    if _is_http_error(exc):
        return _http_failure(exc)
    if not isinstance(exc, OSError):
        return None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) and not exc.filename:
        from llmdeck.errors import OperationError

        return OperationError(
            f"Cannot write the output: {exc.strerror}.",
            hint="Free space where the output goes (the file stdout is redirected to), then run again.",
        )
    if exc.errno == errno.ENAMETOOLONG:
        return _name_too_long(exc)
    return _closed_stdout(exc) or _cwd_gone(exc)


def _is_http_error(exc: Exception) -> bool:
    """httpx's errors, without importing httpx (the error path of every command stays light)."""
    return any(c.__module__.startswith("httpx") and c.__name__ == "HTTPError" for c in type(exc).__mro__)


def _http_failure(exc: Exception) -> Any:
    from llmdeck.client.httpmap import http_failure_words  # httpx is loaded already: exc is one of its
    from llmdeck.errors import EndpointError

    request = getattr(exc, "_request", None)
    where = f" from {request.url}" if request is not None else ""
    return EndpointError(
        f"The reply{where} broke off or never finished ({http_failure_words(exc, 'the connection broke')}).",
        hint="Check that the server is healthy (`llmdeck status`, `llmdeck logs`), then run again.",
    )


def _name_too_long(exc: OSError) -> Any:
    from llmdeck.errors import UsageError
    from llmdeck.util.safetext import safe_text

    name = str(exc.filename or "")
    shown = safe_text(name if len(name) <= 80 else f"{name[:60]}…({len(name)} characters)")
    return UsageError(
        f"The path {shown} is too long for the file system (File name too long): a folder or file "
        "name in a path is at most 255 bytes, the whole path 4096.",
        hint="Check the path you gave (a pasted value or a variable that expanded to more than "
        "meant), or use a shorter name.",
    )


def _closed_stdout(exc: OSError) -> Any:
    """A write to a closed stdout (cli.streams' stand-in): the output had nowhere to go."""
    from llmdeck.cli.streams import CLOSED

    if exc.filename != CLOSED:
        return None
    from llmdeck.errors import OperationError

    return OperationError(
        "Cannot write the output: stdout is closed (the command was run with `>&-`).",
        hint="Send it somewhere: a file (`> out.txt`), or /dev/null to discard it (`> /dev/null`).",
    )


def _cwd_gone(exc: OSError) -> Any:
    """A relative path looked up from a working folder that no longer exists (os.getcwd fails, and the
    error names no file): every relative path, LLMDECK_STATE_DIR's too, had been an internal error."""
    if not isinstance(exc, FileNotFoundError) or exc.filename:
        return None
    try:
        os.getcwd()
    except FileNotFoundError:
        from llmdeck.errors import UsageError

        return UsageError(
            "The folder this command runs in no longer exists (it was deleted or moved after the "
            "shell entered it), so a relative path cannot be looked up.",
            hint="`cd` to an existing folder, or give absolute paths, then run again.",
        )
    return None
