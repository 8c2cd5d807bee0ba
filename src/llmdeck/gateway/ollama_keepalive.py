"""Ollama's ``keep_alive``: how long a model stays loaded after a request, read as Ollama reads it.

Ollama (``api/types.go``, ``Duration.UnmarshalJSON``) takes a number of seconds or a Go duration string
(``"5m"``, ``"1h30m"``, ``"300ms"``); a negative one keeps the model loaded, ``0`` unloads it after the
request. Clients send it with every request (ollama-python's ``keep_alive=``, ``ollama run --keepalive``,
Open WebUI's model settings) to pin a model or to free its memory at once.

In the gateway it sets a model on demand's idle limit in place of its route's ``ttl_s``, until the next
Ollama request for it (one without the field gives the route's back) or its stop; requests through the
OpenAI API leave it as it is. It decides when an idle model is stopped (or put to sleep), and the order in
which idle models are evicted to make room (budget.py), not whether one may be.
"""

from __future__ import annotations

import math
import re
from typing import Any

from llmdeck.gateway.ollama_shapes import OllamaRequestError

FOREVER = math.inf  # a negative keep_alive: never stopped for being idle
_LONGEST_S = 100 * 365 * 86400.0  # longer is FOREVER (Ollama's int64 nanoseconds end at ~292 years)
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"[+-]?(\d+(?:\.\d*)?|\.\d+)")
_MAX_TEXT = 64
_WHAT = (
    '`keep_alive` must be a duration such as "5m", "1h30m" or "30s", or a number of seconds (negative: '
    "keep the model loaded; 0: unload it after this request)"
)


def keep_alive_s(value: Any) -> float | None:
    """Seconds the request asks its model to stay loaded once idle: None (not asked: the route's
    ``ttl_s``), 0 (unload after this request), :data:`FOREVER`, or a number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise OllamaRequestError(f"{_WHAT}; got {type(value).__name__}.")
    if isinstance(value, str):
        return _from_text(value)
    if not math.isfinite(value):
        raise OllamaRequestError(f"{_WHAT}; got {value!r}.")
    return _bounded(FOREVER if value < 0 else float(int(value)))  # whole seconds, as Ollama's int(t)


def _from_text(text: str) -> float:
    body = text.strip()
    if len(body) > _MAX_TEXT or not body:
        raise OllamaRequestError(f"{_WHAT}; got {text[:_MAX_TEXT]!r}.")
    if _NUMBER.fullmatch(body):  # "300", "-1": seconds (Go's parser wants a unit; clients send these)
        return FOREVER if body.startswith("-") else _bounded(float(int(float(body))))
    sign, rest = (-1.0, body[1:]) if body[0] == "-" else (1.0, body.lstrip("+"))
    parts = _PART.findall(rest)
    if not parts or "".join(n + u for n, u in parts) != rest:
        raise OllamaRequestError(f"{_WHAT}; got {text!r}.")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    return FOREVER if sign < 0 and seconds > 0 else _bounded(seconds)


def _bounded(seconds: float) -> float:
    """A limit past any date /api/ps could write is no limit."""
    return FOREVER if seconds > _LONGEST_S else seconds
