"""One managed model's live state: stopped / starting / running / sleeping / stopping / failed."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from llmdeck.gateway.budget import Tenant
from llmdeck.gateway.managed import Budget, ManagedBackend
from llmdeck.runtime.state import ServerRecord

ModelStateName = Literal["stopped", "starting", "running", "sleeping", "stopping", "failed"]
HOLDING = frozenset({"starting", "running", "stopping"})
IN_USE_S = 5.0  # a model with a request in flight, waiting, or ended this recently "still has traffic"
SLEEP_MIN_FREED = 256 << 20  # a sleep that gives the pool back less than this frees nothing


@dataclass
class ManagedModel:
    backend: ManagedBackend
    url: str
    state: ModelStateName = "stopped"
    record: ServerRecord | None = None
    inflight: int = 0
    queue: deque[asyncio.Future[None]] = field(default_factory=deque, repr=False)  # waiting requests
    last_used: float | None = None  # wall clock (time.time) of the last request's start or end
    measured: int | None = None  # the peak of the running footprint (bytes), once measured
    measured_sleeping: int | None = None
    start_seconds: float | None = None
    starts: int = 0
    wakes: int = 0
    evictions: int = 0
    last_error: str | None = None
    failed_at: float | None = None  # monotonic
    ready_at: float | None = None  # monotonic: when it last became ready (started, woke or adopted)
    progress: str | None = None  # the start-up phase reached (set from the start's worker thread)
    wake_fallbacks: int = 0  # wakes (or post-wake probes) that failed and became a stop + cold start
    last_wake: str | None = None
    sleep_freed: dict[int, int] = field(default_factory=dict)  # level -> bytes a sleep gave back (measured)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    asked: bool = False  # a start or wake asked from the dashboard: it waits out residencies, as a request
    stop_asked: bool = False  # the dashboard stopped its start (before the launch, or the engine stopped)
    outside: bool = False  # starting: a start outside the gateway (`llmdeck restart NAME`) loads it
    record_sig: tuple[int, int] | None = None  # its record file when read (a new start's save changes it)
    restart_pid: int | None = None  # starting: the `llmdeck restart NAME` whose new start it waits for
    look: asyncio.Task[None] | None = field(default=None, repr=False)  # outside.py's look at its record
    keep_alive_s: float | None = None  # an Ollama client's keep_alive (ollama_keepalive.py), till its stop

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def waiting(self) -> int:
        return len(self.queue)

    @property
    def unwaited(self) -> bool:
        """Nobody waits for it: no request queued, no start asked from the dashboard."""
        return self.waiting == 0 and not self.asked

    @property
    def bringing_up(self) -> bool:
        """A start (or wake) of it is under way: starting, waiting its turn or a residency."""
        return self.task is not None and not self.task.done()

    def set_progress(self, text: str) -> None:
        self.progress = text

    def begin_start(self) -> None:
        """A cold start begins: status says so until the engine's first event (plan and preflight
        take seconds before it)."""
        self.state, self.starts = "starting", self.starts + 1
        self.progress = "preparing the start (spec, plan, preflight)"

    def touch(self) -> None:
        self.last_used = time.time()

    def idle_s(self) -> float:
        return time.time() - self.last_used if self.last_used is not None else float("inf")

    def idle_limit(self) -> float | None:
        """Seconds idle after which it is stopped (or put to sleep): the last Ollama request's
        ``keep_alive`` where one was given, else its route's ``ttl_s``; None: only to make room."""
        return self.keep_alive_s if self.keep_alive_s is not None else self.backend.ttl_s

    def busy(self) -> bool:
        return self.inflight > 0 or self.waiting > 0

    def resident_s(self) -> float:
        """Seconds left of its minimum residency while it still has traffic (0: it may be evicted)."""
        if self.state != "running" or self.ready_at is None:
            return 0.0
        left = self.backend.min_resident_s - (time.monotonic() - self.ready_at)
        in_use = self.busy() or self.idle_s() < IN_USE_S
        return left if left > 0 and in_use else 0.0

    def ready(self) -> None:
        self.state = "running"
        self.ready_at = time.monotonic()
        self.touch()

    def estimate(self) -> int:
        """What a start needs: the footprint measured on an earlier run, else the plan's."""
        return self.measured or self.backend.planned.bytes

    def estimate_how(self) -> str:
        if self.measured:
            return f"measured on its last run; planned {self.backend.planned.bytes / (1 << 30):.2f} GiB"
        return self.backend.planned.how

    def held(self, kind: str) -> int:
        """Bytes this model holds now in the budget's memory."""
        if self.state in HOLDING:
            return self.estimate()
        if self.state == "sleeping":
            if self.measured_sleeping is not None:
                return self.measured_sleeping
            return self.backend.planned.sleeping(self.backend.sleep_level or 1, kind)
        return 0

    def tenant(self, starting: ManagedModel, budget: Budget) -> Tenant | None:
        held = self.held(budget.kind)
        if held <= 0:
            return None
        blocked = None
        if self.backend.keep:
            blocked = "keep: true"
        elif self.backend.group is not None and self.backend.group == starting.backend.group:
            blocked = f"same group {self.backend.group!r} as {starting.name}"
        elif self.state == "starting" and self.outside:
            blocked = "loading: started again outside the gateway"
        elif self.state in {"starting", "stopping"}:
            blocked = self.state
        last = self.last_used or 0.0
        return Tenant(
            self.name,
            held,
            busy=self.busy(),
            last_used=last,
            blocked=blocked,
            resident_s=self.resident_s(),
            keep_s=self.keep_alive_s or 0.0,  # never negative: -1 is FOREVER
        )

    def woke(self, level: int, seconds: float, probe_s: float) -> None:
        self.ready()
        self.wakes += 1
        self.last_wake = (
            f"woke from sleep level {level} in {seconds:.1f} s; the probe answered in {probe_s:.2f} s"
        )

    def record_sleep(self, level: int, awake: int | None, kind: str) -> bool:
        """Note what a sleep at ``level`` gave back (measured awake − asleep); False when it freed
        (almost) nothing on unified memory, where level 1 only moves the weights within the pool."""
        if awake is None or self.measured_sleeping is None:
            return True
        self.sleep_freed[level] = max(0, awake - self.measured_sleeping)
        return not self.sleep_refused(level, kind)

    def sleep_refused(self, level: int | None, kind: str) -> str:
        """Why sleeping at ``level`` is refused (measured to free nothing on unified memory), or ''."""
        freed = self.sleep_freed.get(level) if level is not None else None
        if kind != "unified" or freed is None or freed >= SLEEP_MIN_FREED:
            return ""
        return (
            f"sleep level {level} freed {freed / (1 << 30):.2f} GiB of the unified pool (measured), "
            f"less than {SLEEP_MIN_FREED >> 20} MiB: refused"
        )

    def running(self, record: ServerRecord, seconds: float | None) -> None:
        self.record = record
        self.start_seconds = seconds
        self.last_error = None
        self.failed_at = None
        self.outside, self.restart_pid = False, None
        self.ready()

    def stopped(self) -> None:
        self.state = "stopped"
        self.record = None
        self.measured_sleeping = None
        self.outside, self.restart_pid = False, None
        self.keep_alive_s = None

    def fail(self, text: str, *, mark: bool) -> None:
        self.last_error = text
        self.outside, self.restart_pid = False, None
        if mark:
            self.record = None
            self.state = "failed"
            self.failed_at = time.monotonic()
        elif self.state not in {"running", "sleeping"}:
            self.state = "stopped"

    def snapshot(self, budget: Budget) -> dict[str, Any]:
        gib = 1 << 30
        held = self.held(budget.kind)
        return {
            "model": self.name,
            "url": self.url,
            "state": self.state,
            "progress": self.progress if self.state == "starting" or self.waiting else None,
            "planned_gib": round(self.backend.planned.bytes / gib, 3),
            "planned_how": self.backend.planned.how,
            "measured_gib": round(self.measured / gib, 3) if self.measured else None,
            "held_gib": round(held / gib, 3),
            "last_used": self.last_used,
            "idle_s": round(self.idle_s(), 1) if self.last_used is not None else None,
            "in_flight": self.inflight,
            "queue": self.waiting,
            "starts": self.starts,
            "wakes": self.wakes,
            "evictions": self.evictions,
            "start_seconds": round(self.start_seconds, 1) if self.start_seconds else None,
            "keep": self.backend.keep,
            "ttl_s": self.backend.ttl_s,
            "keep_alive_s": -1 if self.keep_alive_s == float("inf") else self.keep_alive_s,
            "group": self.backend.group,
            "sleep_level": self.backend.sleep_level,
            "min_resident_s": self.backend.min_resident_s,
            "last_error": self.last_error,
            "wake_fallbacks": self.wake_fallbacks,
            "last_wake": self.last_wake,
            "sleep_freed_gib": {str(k): round(v / gib, 3) for k, v in self.sleep_freed.items()},
            "pid": self.record.pid if self.record is not None else None,
        }


def budget_status(b: Budget, models: list[ManagedModel]) -> dict[str, Any]:
    """The budget (settings and what the models hold) and every model's snapshot."""
    held = sum(m.held(b.kind) for m in models)
    budget = {
        **b.model_dump(mode="json", exclude={"queue"}),
        **b.queue.model_dump(mode="json"),
        "held_gib": round(held / (1 << 30), 3),
    }
    return {"budget": budget, "models": [m.snapshot(b) for m in models]}
