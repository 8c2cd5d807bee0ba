"""Byte units, defined once for every layer (plan/ and engines/ sit below runtime/)."""

from __future__ import annotations

MIB = 1 << 20
GIB = 1 << 30


def fmt_gib(n: int | float) -> str:
    """``12.3 GiB``."""
    return f"{n / GIB:.1f} GiB"
