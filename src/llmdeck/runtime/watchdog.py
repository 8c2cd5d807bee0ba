"""A start-up watchdog: stop the engine before the box thrashes.

While vLLM loads weights and compiles, the box's memory can run out: on unified-memory machines
(GB10) the model, the KV cache and everything else share one pool, and a start that overshoots
pushes the kernel into swapping until the machine stops answering (seed 004: GLM-4.7-Flash "put the
machine into heavy loading/swapping" and never reached the benchmark). The watchdog samples
MemAvailable, swap and memory pressure (PSI, where the kernel has it) at each readiness poll and
trips when:

* MemAvailable falls below the floor (default 1.5 GiB, or ``LLMDECK_WATCHDOG_FLOOR_GIB``): what the
  OS, sshd and the engine's own API process need to stay responsive once the KV cache is allocated;
* swap in use grows by more than ``swap_growth_gib`` (default 2 GiB) since the start began: pages
  of the engine's load are being pushed out, the first stage of thrashing;
* PSI ``full avg10`` exceeds ``psi_full_avg10`` (default 30 %): every task is stalled on memory.

It never trips on page cache: MemAvailable already counts the reclaimable part.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, Field

from llmdeck.errors import OperationError
from llmdeck.runtime.host import MemInfo, read_meminfo, read_psi_avg10
from llmdeck.util.units import GIB


class WatchdogConfig(BaseModel):
    floor_gib: float = Field(1.5, ge=0, description="Trip when MemAvailable falls below this.")
    swap_growth_gib: float = Field(2.0, gt=0, description="Trip when swap in use grows by more.")
    psi_full_avg10: float = Field(30.0, gt=0, le=100, description="Trip when PSI full avg10 exceeds it.")
    interval_s: float = Field(1.0, gt=0, le=60, description="The running guard samples this often.")


# which flag (or setting) changes each limit, for the message of a trip
LIMIT_FLAGS = {
    "floor": "--watchdog-floor-gib (LLMDECK_WATCHDOG_FLOOR_GIB)",
    "swap": "the swap-growth limit (WatchdogConfig.swap_growth_gib)",
    "psi": "the memory-pressure limit (WatchdogConfig.psi_full_avg10)",
}


def trip_reason(c: WatchdogConfig, now: WatchdogSample, first: WatchdogSample) -> tuple[str, str] | None:
    """(limit, words) of the first limit ``now`` crosses, None when none is."""
    if now.available_bytes < c.floor_gib * GIB:
        return "floor", (
            f"MemAvailable fell to {now.available_bytes / GIB:.2f} GiB, under the {c.floor_gib:g} GiB floor"
        )
    grown = now.swap_used_bytes - first.swap_used_bytes
    if grown > c.swap_growth_gib * GIB:
        return "swap", f"swap in use grew by {grown / GIB:.2f} GiB (limit {c.swap_growth_gib:g} GiB)"
    if now.psi_full_avg10 is not None and now.psi_full_avg10 > c.psi_full_avg10:
        return "psi", (
            f"memory pressure (PSI full avg10) reached {now.psi_full_avg10:.1f}% "
            f"(limit {c.psi_full_avg10:g}%)"
        )
    return None


def trip_hint(limit: str) -> str:
    return (
        f"Change the limit with {LIMIT_FLAGS[limit]} if this box can take it, or turn the watchdog off with "
        "--no-watchdog (at your risk on unified memory); better, plan a smaller footprint (`llmdeck plan "
        "MODEL`: a lower --max-model-len or --kv-cache-memory-bytes, a quantized model) or stop other "
        "tenants (`llmdeck status` shows the pool)."
    )


class WatchdogSample(BaseModel):
    available_bytes: int
    swap_used_bytes: int
    psi_full_avg10: float | None = None


class WatchdogTripped(OperationError):
    """The box was about to thrash during a start-up; the engine was stopped."""


def sample(mem: MemInfo, psi_full: float | None) -> WatchdogSample:
    return WatchdogSample(
        available_bytes=mem.available,
        swap_used_bytes=mem.swap_used,
        psi_full_avg10=psi_full,
    )


class StartupWatchdog:
    """Call :meth:`check` at each readiness poll; it raises :class:`WatchdogTripped` when it trips."""

    def __init__(
        self,
        config: WatchdogConfig,
        *,
        read: Callable[[], WatchdogSample] | None = None,
        held: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.held = held
        self._read = read or (lambda: sample(read_meminfo(), read_psi_avg10(kind="full")))
        self.first: WatchdogSample | None = None
        self.lowest_available: int | None = None

    def check(self) -> None:
        now = self._read()
        if self.first is None:
            self.first = now
        if self.lowest_available is None or now.available_bytes < self.lowest_available:
            self.lowest_available = now.available_bytes
        tripped = trip_reason(self.config, now, self.first)
        if tripped:
            limit, reason = tripped
            held = f"; the engine held {self.held() / GIB:.2f} GiB" if self.held is not None else ""
            raise WatchdogTripped(
                f"Stopped the engine during start-up: {reason}{held}. The box was about to thrash (swap, "
                "then no response), as a start that does not fit does on unified memory.",
                hint=trip_hint(limit),
            )
