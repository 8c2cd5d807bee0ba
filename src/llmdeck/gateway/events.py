"""The model manager's recent events (starts, evictions, refusals...), for the dashboard (``/ui``).

A ring of the newest :data:`MAX_EVENTS`; a refusal that repeats the one before it (the same model, code
and text: every request of a burst refused for the same reason) only bumps that entry's count and time.
Reasons are the manager's own words (the same as its log lines); never a prompt or a key.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Literal

MAX_EVENTS = 200
MAX_REASON = 600

EventKind = Literal[
    "start", "ready", "failed", "evict", "stopped", "sleep", "wake", "exited", "refused", "adopted"
]


@dataclass
class Event:
    seq: int
    at: float  # wall clock (time.time) of the last occurrence
    kind: EventKind
    model: str
    reason: str
    code: str | None = None  # refused: the error code clients got (insufficient_memory, queue_full, ...)
    count: int = 1


class EventLog:
    def __init__(self, size: int = MAX_EVENTS) -> None:
        self._events: deque[Event] = deque(maxlen=size)
        self._seq = 0

    def add(self, kind: EventKind, model: str, reason: str, code: str | None = None) -> None:
        reason = reason[:MAX_REASON]
        last = self._events[-1] if self._events else None
        if (
            kind == "refused"
            and last is not None
            and (last.kind, last.model, last.code, last.reason)
            == (
                kind,
                model,
                code,
                reason,
            )
        ):
            last.count += 1
            last.at = time.time()
            return
        self._seq += 1
        self._events.append(Event(self._seq, time.time(), kind, model, reason, code))

    def newest(self, n: int = 50) -> list[Event]:
        """The newest ``n`` events, newest first."""
        return list(reversed(self._events))[:n]
