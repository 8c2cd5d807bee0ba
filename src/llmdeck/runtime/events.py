"""What a service call reports as it runs: typed events, each with the seconds since the call began,
for the caller to render (the CLI) or record (tune, the gateway)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

EventKind = Literal[
    "preflight",
    "starting",
    "log",
    "phase",
    "ready",
    "failed",
    "draining",
    "stopping",
    "stopped",
    "memory",
    "tenants",
    "warmup",
    "image",
]


class ServiceEvent(BaseModel):
    """One step of a service call, for the caller to render (or record)."""

    kind: EventKind
    message: str
    seconds: float | None = Field(None, description="Since the call began.")
    data: dict[str, Any] = Field(default_factory=dict)


Events = Callable[[ServiceEvent], None]


def ignore(_: ServiceEvent) -> None:
    return None


class EventClock:
    def __init__(self, events: Events) -> None:
        self.t0 = time.monotonic()
        self.events = events

    def emit(self, kind: EventKind, message: str, **data: Any) -> None:
        self.events(ServiceEvent(kind=kind, message=message, seconds=time.monotonic() - self.t0, data=data))
