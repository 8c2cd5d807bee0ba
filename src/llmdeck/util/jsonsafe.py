"""``json.loads`` for data from elsewhere (a server's reply, a client's request, an agent's output, a
file): a document nested too deep for Python's decoder raises ``RecursionError``, which no
``except ValueError`` catches, so a hostile reply was an internal error. Here it is a ``ValueError``
like any other malformed JSON."""

from __future__ import annotations

import json
import math
from typing import Any

from llmdeck.errors import InternalError


class TooDeepError(InternalError, json.JSONDecodeError):
    """The JSON is nested deeper than the decoder can follow (a ``JSONDecodeError``, so every
    ``except json.JSONDecodeError`` that reports a malformed file reports this one too)."""

    def __init__(self, msg: str, doc: str, pos: int) -> None:
        json.JSONDecodeError.__init__(self, msg, doc, pos)
        self.message, self.hint = str(self), None


class TooLongNumberError(InternalError, json.JSONDecodeError):
    """The JSON holds an integer longer than Python reads (4,300 digits: ``sys.int_info``), which
    ``json.loads`` raises as a bare ``ValueError`` naming ``sys.set_int_max_str_digits``."""

    def __init__(self, msg: str, doc: str, pos: int) -> None:
        json.JSONDecodeError.__init__(self, msg, doc, pos)
        self.message, self.hint = str(self), None


class NotJsonNumberError(InternalError, json.JSONDecodeError):
    """NaN, Infinity or -Infinity: Python's decoder reads them, JSON has no such number."""

    def __init__(self, msg: str, doc: str, pos: int) -> None:
        json.JSONDecodeError.__init__(self, msg, doc, pos)
        self.message, self.hint = str(self), None


def _refuse_constant(name: str) -> Any:
    raise NotJsonNumberError(f"{name}, which is no JSON number", "", 0)


def _finite(text: str) -> float:
    """A JSON number past a double's range (``1e999``) is read as infinity, and written out again as
    ``Infinity``, which no JSON parser takes: refused as NaN and Infinity are."""
    value = float(text)
    if math.isinf(value):
        raise NotJsonNumberError(f"{text[:40]}, a number past a 64-bit float's range", "", 0)
    return value


def loads(text: str | bytes, *, strict_numbers: bool = False) -> Any:
    """``json.loads``; ``strict_numbers``: NaN, Infinity and a number past a float's range (``1e999``)
    raise ``NotJsonNumberError`` (a client's request passed on to a server that may take them for
    numbers, or written out again by the gateway as ``Infinity``)."""
    try:
        if strict_numbers:
            return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else ""
        raise TooDeepError("the JSON is nested too deep to read", doc, 0) from None
    except ValueError as e:
        if "integer string conversion" not in str(e):  # not Python's 4,300-digit cap on int()
            raise
        doc = text if isinstance(text, str) else ""
        raise TooLongNumberError("the JSON holds a number of more than 4,300 digits", doc, 0) from None
