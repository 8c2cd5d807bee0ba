"""Quoting for a shell that also keeps a terminal safe: ``shlex.quote``, except that a string holding
control characters (ESC, CR, BEL, newline ...) or bidi controls (U+202E ...) becomes ANSI-C ``$'...'``
with them escaped, so a printed command neither runs anything nor drives (or reorders) the terminal
that shows it, and still pastes back as the same word."""

from __future__ import annotations

import shlex

from llmdeck.util.safetext import escape_char, is_unsafe


def _is_control(ch: str) -> bool:
    return ch in "\n\t" or is_unsafe(ch)


def quote(word: str) -> str:
    if not any(_is_control(ch) for ch in word):
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in "\\'":
            out.append("\\" + ch)
        elif _is_control(ch):
            out.append(escape_char(ch))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def join(argv: list[str]) -> str:
    return " ".join(quote(a) for a in argv)
