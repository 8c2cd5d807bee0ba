"""The memory budget: does a model fit, and what must go first? (Pure: no processes, no I/O.)

``capacity`` is what the managed models and the other tenants may hold together: a fixed number
(``budget.memory_gib: N``) or, with ``auto``, the memory free now (MemAvailable, or the GPU's free
memory) less the reserve, plus what the current tenants hold (they give it back when evicted).
Each tenant holds ``bytes`` (measured once it runs, else planned). :func:`decide` picks what to evict,
least recently used first — idle models before busy ones (a busy model is drained first), the
gateway's own models before Ollama's — and never a ``keep`` model, a member of the starting model's
group, or Ollama's models unless the config allows. When even evicting everything allowed would not
make room, the answer is a refusal that names what would have to go and why it may not.

Minimum residency (against thrash): a tenant with ``resident_s`` > 0 became ready less than its
``min_resident_s`` ago and is still in use; it is not evicted for another model. When only such
tenants stand between a model and its room, the answer is to wait (``wait_s``), not to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

GIB = 1 << 30

TenantKind = Literal["model", "ollama"]


def gib(n: int | float) -> str:
    return f"{n / GIB:.2f} GiB"


@dataclass(frozen=True)
class Tenant:
    """Something that holds memory in the budget: a managed model, or one of Ollama's models."""

    name: str
    bytes: int
    kind: TenantKind = "model"
    busy: bool = False  # requests in flight or waiting
    last_used: float = 0.0
    blocked: str | None = None  # why it may not be evicted ("keep: true", …), None when it may
    resident_s: float = 0.0  # > 0: within its minimum residency and in use for this many seconds more
    keep_s: float = 0.0  # an Ollama client's keep_alive (inf: -1, "keep it"); 0 where none was given


@dataclass
class Decision:
    """The answer for one start: fits (maybe after evictions) or refused with the reason."""

    fits: bool
    need: int
    capacity: int
    held: int
    evict: list[Tenant] = field(default_factory=list)
    reason: str = ""
    wait_s: float = 0.0  # > 0: room only once a resident model's minimum residency ends; ask again then

    @property
    def free_after(self) -> int:
        return self.capacity - self.held + sum(t.bytes for t in self.evict) - self.need


def _order(t: Tenant) -> tuple[bool, bool, float, float]:
    """Eviction order: idle before busy, ours before Ollama's, then the shortest keep_alive first as
    Ollama's own scheduler unloads (server/sched.go findRunnerToUnload: sorted by session duration, a
    negative one last), then the least recently used."""
    return (t.busy, t.kind == "ollama", t.keep_s, t.last_used)


def decide(name: str, need: int, capacity: int, tenants: list[Tenant]) -> Decision:
    """Whether model ``name`` (``need`` bytes) fits in ``capacity`` with ``tenants`` holding memory."""
    held = sum(t.bytes for t in tenants)
    decision = Decision(fits=False, need=need, capacity=capacity, held=held)
    if need > capacity - sum(t.bytes for t in tenants if t.blocked):
        decision.reason = _refusal(name, need, capacity, tenants)
        return decision
    free = capacity - held
    for tenant in sorted((t for t in tenants if not t.blocked and t.resident_s <= 0), key=_order):
        if free >= need:
            break
        decision.evict.append(tenant)
        free += tenant.bytes
    decision.fits = free >= need
    if not decision.fits:  # the rest of the room is held by resident models: wait for them
        resident = [t for t in tenants if not t.blocked and t.resident_s > 0]
        decision.evict = []
        decision.wait_s = min((t.resident_s for t in resident), default=0.0)
        listed = ", ".join(f"{t.name} ({gib(t.bytes)}, {t.resident_s:.0f} s more)" for t in resident)
        decision.reason = (
            f"{name} waits: {listed} became ready recently and still serves (min_resident_s); it is "
            "evicted once that time is up or it goes idle."
        )
    return decision


def _refusal(name: str, need: int, capacity: int, tenants: list[Tenant]) -> str:
    """Why ``name`` cannot start even after every allowed eviction: what would have to go."""
    if need > capacity:
        return (
            f"{name} needs {gib(need)} and the whole budget is {gib(capacity)}: it does not fit even with "
            "nothing else running."
        )
    blocked = [t for t in tenants if t.blocked]
    room = capacity - sum(t.bytes for t in blocked)
    listed = ", ".join(f"{t.name} ({gib(t.bytes)}, {t.blocked})" for t in blocked)
    return (
        f"{name} needs {gib(need)} of the {gib(capacity)} budget, and only {gib(room)} can be freed: "
        f"{listed} would have to go too."
    )


def capacity_bytes(
    fixed_gib: float | None, free_now: int | None, reserve: int, tenants: list[Tenant]
) -> int | None:
    """The budget: a fixed size, or (auto) the free memory less the reserve plus what tenants hold."""
    if fixed_gib is not None:
        return int(fixed_gib * GIB)
    if free_now is None:
        return None
    return max(0, free_now - reserve) + sum(t.bytes for t in tenants)
