"""Byte units, defined once for every layer (plan/ and engines/ sit below runtime/)."""

from __future__ import annotations

from llmdeck.errors import UsageError

MIB = 1 << 20
GIB = 1 << 30


def fmt_gib(n: int | float) -> str:
    """``12.3 GiB``."""
    return f"{n / GIB:.1f} GiB"


def parse_bytes(text: str) -> int:
    """``--kv-cache-memory-bytes``: an integer, or with a K/M/G/T suffix (binary, as vLLM reads it)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    try:
        n = int(float(t[:-1]) * mult[t[-1]]) if t and t[-1] in mult else int(float(t))
    except (ValueError, OverflowError) as exc:  # 1e999: an infinite float
        raise UsageError(
            f"--kv-cache-memory-bytes {text!r} is not a size.", hint="Write e.g. 60G or 64424509440."
        ) from exc
    if not 0 < n <= 1 << 60:
        raise UsageError(
            f"--kv-cache-memory-bytes {text!r} is out of range (more than 0, at most 1 EiB).",
            hint="Write e.g. 60G or 64424509440.",
        )
    return n
