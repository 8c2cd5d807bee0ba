"""How deep and how big a JSON document is, measured without recursion (for the readers' bounds)."""

from __future__ import annotations

import re
from typing import Any

_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deep ``[``/``{`` nest in JSON text (brackets inside strings are skipped), without parsing."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok in "]}":
            depth -= 1
    return deepest


def value_depth(value: Any, max_values: int | None = None) -> tuple[int, int]:
    """(depth, values): how deep lists and objects nest in a parsed JSON value and how many values it
    holds (an explicit stack: no recursion); the count stops just past ``max_values``."""
    deepest = count = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        count += len(children)
        deepest = max(deepest, depth)
        if max_values is not None and count > max_values:
            break
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return deepest, count
