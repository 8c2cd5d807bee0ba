"""Server names: one rule, checked in one place before a name becomes part of a path.

A name is used as ``servers/NAME.json``, ``logs/NAME.log`` and the container ``llmdeck-NAME``, so
``../../x`` or ``a/b`` must never get that far. Every command that takes a name goes through
:func:`validate_server_name` (the state store calls it for every path it builds).
"""

from __future__ import annotations

import re

from llmdeck.errors import UsageError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
NAME_RE = re.compile(NAME_PATTERN)
NAME_RULE = "letters, digits, '.', '_' and '-' (at most 63), starting with a letter or digit"


def is_valid_server_name(name: str) -> bool:
    return bool(NAME_RE.fullmatch(name)) and ".." not in name


def validate_server_name(name: str) -> str:
    """``name`` unchanged when it is a valid server name; else UsageError (exit 2)."""
    if not isinstance(name, str) or not is_valid_server_name(name):
        raise UsageError(
            f"{name!r} is not a valid server name: names use {NAME_RULE}.",
            hint="Use a name like 'default' or 'qwen3-coder'; `llmdeck status` lists the servers "
            "llmdeck knows.",
        )
    return name
