"""Requests-per-minute limits per key: a sliding 60-second window."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Collection

WINDOW_S = 60.0


class RateLimiter:
    """``check(name, rpm)`` admits a request or says how many seconds to wait (Retry-After)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}

    def check(self, name: str, rpm: int | None) -> int | None:
        """None when admitted (and counted); else the whole seconds until a slot frees."""
        if rpm is None:
            return None
        now = self._clock()
        window = self._seen.setdefault(name, deque())
        while window and now - window[0] >= WINDOW_S:
            window.popleft()
        if len(window) >= rpm:
            return max(1, math.ceil(WINDOW_S - (now - window[0])))
        window.append(now)
        return None

    def forget(self, names: Collection[str]) -> None:
        """Revoked keys' windows: a new key of the same name starts with its own."""
        for name in names:
            self._seen.pop(name, None)
