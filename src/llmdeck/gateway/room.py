"""The model manager's budget steps: what must go before a start, evictions, stops (``ModelManager``'s base).

``_make_room`` asks :mod:`llmdeck.gateway.budget` in rounds (a sleep may free less than estimated);
a resident model (``min_resident_s``) holds the start back while it has traffic; victims stop taking
requests, drain, then sleep (``sleep_level:``) or stop. A start the dashboard stopped ends here too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from llmdeck.gateway import lifecycle
from llmdeck.gateway.budget import Decision, Tenant, capacity_bytes, decide, gib
from llmdeck.gateway.events import EventLog
from llmdeck.gateway.managed import Budget
from llmdeck.gateway.model_state import ManagedModel
from llmdeck.gateway.refusals import Refusal

log = logging.getLogger("llmdeck.gateway.models")

RESIDENT_POLL_S = 0.5  # how often a model held back by another's minimum residency asks again


class RoomMaker:
    """The eviction side of :class:`llmdeck.gateway.manager.ModelManager`."""

    settings: Any
    budget: Budget
    models: dict[str, ManagedModel]
    events: EventLog

    def _stopped_start(self, model: ManagedModel, when: str) -> Refusal:
        """The dashboard stopped the start: the model is stopped (not failed: the next request starts it)."""
        text = f"The start of {model.name!r} was stopped from the dashboard {when}."
        log.info("%s", text)
        model.stopped()
        model.progress = None
        self.events.add("stopped", model.name, f"its start was stopped from the dashboard {when}")
        return Refusal(503, text, "model_start_stopped", 10)

    async def _tenants(self, starting: ManagedModel) -> list[Tenant]:
        found = (m.tenant(starting, self.budget) for m in self.models.values() if m is not starting)
        out = [t for t in found if t is not None]
        for name, size in await asyncio.to_thread(lifecycle.ollama_models, self.budget.kind):
            blocked = (
                None if self.budget.allow_unload_ollama else "Ollama's; budget.allow_unload_ollama is off"
            )
            out.append(Tenant(f"ollama:{name}", size, kind="ollama", blocked=blocked))
        return out

    async def _decide(self, model: ManagedModel) -> Decision | Refusal:
        tenants = await self._tenants(model)
        fixed = None if self.budget.memory_gib == "auto" else float(self.budget.memory_gib)
        free = None
        if fixed is None:
            free = await asyncio.to_thread(lifecycle.free_now, self.budget.kind, self.budget.gpu_index)
        reserve = int(self.budget.reserve_gib * (1 << 30))
        capacity = capacity_bytes(fixed, free, reserve, tenants)
        if capacity is None:
            return Refusal(
                503,
                f"Cannot read the free memory for the budget (kind {self.budget.kind}): NVML gave no answer.",
                "budget_unknown",
            )
        need = model.estimate() - (model.held(self.budget.kind) if model.state == "sleeping" else 0)
        return decide(model.name, need, capacity, tenants)

    async def _decide_after_residency(self, model: ManagedModel) -> Decision | Refusal:
        """The budget's answer once no resident model (``min_resident_s``) stands in the way.

        The wait is bounded by the residents' ``min_resident_s``, and ends early when they go idle or
        when nobody waits for ``model`` any more (its requests left after ``budget.queue.wait_s``)."""
        logged = False
        while True:
            decision = await self._decide(model)
            if model.stop_asked:
                return self._stopped_start(model, "before its launch")
            if isinstance(decision, Refusal) or decision.wait_s <= 0 or model.unwaited:
                model.progress = None
                if isinstance(decision, Decision) and decision.wait_s > 0:  # its requests gave up
                    text = f"Dropped the start of {model.name!r}: nobody waits for it now ({decision.reason})"
                    return Refusal(503, text, "model_not_ready", 10)
                return decision
            if not logged:
                log.info("hold %s: %s", model.name, decision.reason)
                logged = True
            model.progress = decision.reason
            await asyncio.sleep(min(decision.wait_s, RESIDENT_POLL_S))

    async def _make_room(self, model: ManagedModel) -> Refusal | None:
        """Evict what the budget says must go (draining busy victims first); refuse what cannot fit.

        In rounds: a model put to sleep may free less than the estimate said (the measurement after the
        sleep tells), and the next round then stops it."""
        for _ in range(2 * len(self.models) + 2):
            decision = await self._decide_after_residency(model)
            if isinstance(decision, Refusal):
                return decision
            if not decision.fits:
                log.warning("refused %s: %s", model.name, decision.reason)
                text = f"Model {model.name!r} cannot start: {decision.reason}"
                return Refusal(503, text, "insufficient_memory")
            if not decision.evict:
                return None
            for victim in decision.evict:
                await self._evict_tenant(victim, model, decision)
            await asyncio.to_thread(lifecycle.settle_memory, self.budget.kind)
        return Refusal(503, f"Could not make room for {model.name!r}.", "insufficient_memory")

    async def _evict_tenant(self, victim: Tenant, model: ManagedModel, decision: Decision) -> None:
        if victim.kind == "ollama":
            log.info("evict %s for %s: unloading it (%s)", victim.name, model.name, gib(victim.bytes))
            await asyncio.to_thread(lifecycle.unload_ollama, victim.name.removeprefix("ollama:"))
            return
        target = next(m for m in self.models.values() if m.name == victim.name)
        await self._evict(target, f"to make room for {model.name} (needs {gib(decision.need)})")

    async def _evict(self, model: ManagedModel, why: str) -> None:
        """Stop taking requests, let the ones in flight finish (bounded), then sleep or stop."""
        previous = model.state
        model.state, model.keep_alive_s = "stopping", None  # a keep_alive lasts till the model goes
        deadline = time.monotonic() + self.budget.queue.wait_s
        while model.inflight > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        level = model.backend.sleep_level
        refused = model.sleep_refused(level, self.budget.kind)  # measured to free nothing: stop
        if level is not None and previous == "running" and not refused:
            log.info("evict %s %s: sleep level %d (LRU, idle %.0f s)", model.name, why, level, model.idle_s())
            self.events.add("sleep", model.name, f"evicted {why}: sleep level {level}")
            try:
                before = model.estimate()  # awake: measured, else planned
                await asyncio.to_thread(lifecycle.sleep, model.url, level)
                model.state, model.evictions = "sleeping", model.evictions + 1
                model.measured_sleeping = await self._measure_now(model)
                if model.record_sleep(level, before, self.budget.kind):
                    return
                refused = model.sleep_refused(level, self.budget.kind)
                model.evictions -= 1
            except Exception as exc:
                log.error("sleep %s failed (%s); stopping it instead", model.name, exc)
        how = refused or f"LRU, idle {model.idle_s():.0f} s"
        log.info("evict %s %s: stopping it (%s)", model.name, why, how)
        self.events.add("evict", model.name, f"evicted {why}: stopping it ({how})")
        model.evictions += 1
        await self._stop(model, why)

    async def _stop(self, model: ManagedModel, why: str) -> None:
        model.state = "stopping"
        outcome = await asyncio.to_thread(lifecycle.stop, model.name, self.settings)
        model.stopped()
        log.info("stopped %s (%s): %s", model.name, why, outcome)
        self.events.add("stopped", model.name, why)

    async def _measure(self, model: ManagedModel) -> None:
        value = await self._measure_now(model)
        if value is not None and model.state == "running":
            first = model.measured is None
            model.measured = max(value, model.measured or 0)
            if first:
                planned = model.backend.planned.bytes
                log.info(
                    "footprint %s: measured %s, planned %s (%+.0f%%)",
                    model.name,
                    gib(value),
                    gib(planned),
                    (value - planned) / planned * 100 if planned else 0.0,
                )

    async def _measure_now(self, model: ManagedModel) -> int | None:
        from llmdeck.gateway.footprint import measure

        pid = model.record.pid if model.record is not None else None
        return await asyncio.to_thread(measure, pid, self.budget.kind, self.budget.gpu_index)
