"""Quoting for a shell that also keeps a terminal safe: ``shlex.quote``, except that a string holding
control characters (ESC, CR, BEL ...) becomes ANSI-C ``$'...'`` with them escaped, so a printed command
neither runs anything nor drives the terminal that shows it, and still pastes back as the same word."""

from __future__ import annotations

import shlex


def _is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 32 or code == 127 or 0x80 <= code < 0xA0


def quote(word: str) -> str:
    if not any(_is_control(ch) for ch in word):
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in "\\'":
            out.append("\\" + ch)
        elif _is_control(ch):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def join(argv: list[str]) -> str:
    return " ".join(quote(a) for a in argv)
