"""Strings from servers, users and files shown as data: the one definition of a character that must not
reach a terminal raw (C0 controls but newline and tab, DEL, C1 controls, the bidi embeddings,
overrides and isolates U+202A-U+202E and U+2066-U+2069, lone surrogates), and the one way to put data
into a rich markup string (``markup_data``: its ``[`` can open no tag).

Used by: ``llmdeck.cli.output`` (its console passes every string through ``safe_text``), the HTML
report (``llmdeck.bench.html``), the renderers below the CLI (``checks``, ``bench``) and
``llmdeck.util.shellquote``.
"""

from __future__ import annotations

import re

BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
# what is_unsafe says, for a whole string at once: a page's SVG charts (hundreds of KB) had been checked
# character by character in Python, ~3.7 s of one bench page's 8.6
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def is_unsafe(ch: str) -> bool:
    """True for a character shown escaped: a control character (not newline or tab), a bidi control, or
    a lone surrogate (a path's byte that is not UTF-8, ``$'caf\\xe9'``: no stream can encode it)."""
    code = ord(ch)
    if code < 32:
        return ch not in "\n\t"
    return code == 127 or 0x80 <= code < 0xA0 or ch in BIDI_CONTROLS or 0xD800 <= code < 0xE000


def escape_char(ch: str) -> str:
    """``\\x1b`` for a character below U+0100, ``\\u202e`` above; a byte that was not UTF-8 (Python's
    surrogate U+DC80-U+DCFF for it) as that byte, ``\\xe9``: in ``$'...'`` it pastes back the same."""
    code = ord(ch)
    if 0xDC80 <= code < 0xDD00:
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """``text`` with control characters (ESC, CR, BEL, C1 ...) and bidi controls shown as ``\\xNN`` /
    ``\\uNNNN``: a string from a server or a file is printed as data and never drives the terminal
    (colours, titles, cursor moves) or reorders what is shown."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda m: escape_char(m.group()), text)


def safe_line(text: str) -> str:
    """``safe_text`` for one line of a log: a newline or tab is escaped too (a client's path cannot
    forge a second log line)."""
    return safe_text(text).replace("\n", "\\x0a").replace("\t", "\\x09")


def markup_data(value: object) -> str:
    """``value`` as text to put into a rich markup string: control characters shown (``safe_text``) and
    every ``[`` that could open a tag escaped, so ``[/]`` or ``[link=...]`` in a model id prints as
    itself instead of crashing or styling the line."""
    from rich.markup import escape

    return escape(safe_text(str(value)))


LONG_WORD = 200
"""A word (a run without spaces) of a message longer than this is shown cut: a 100,000-character
--machine or --name had been echoed whole, ~100 KB of stderr for one mistyped value."""


def shorten_long_words(text: str, limit: int = LONG_WORD) -> str:
    """``text`` with every run of more than ``limit`` non-space characters cut to its first 80, then
    ``…(N characters)`` (N: the value's own length) and the run's closing quotes or punctuation (a
    quoted value stays quoted)."""
    import re

    def cut(match: re.Match[str]) -> str:
        word = match.group(0)
        lead = min(3, len(word) - len(word.lstrip("'\"`([")))
        end = min(3, len(word) - len(word.rstrip("'\"`)].,:;")))
        core = word[lead : len(word) - end]
        return f"{word[:lead]}{core[:80]}…({len(core)} characters){word[len(word) - end :]}"

    return re.sub(rf"\S{{{limit + 1},}}", cut, text)
