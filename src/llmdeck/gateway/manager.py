"""The model manager: routes whose backends are launch specs get their servers started on demand.

* The first request for a stopped model starts it (``lifecycle.start``: the runtime service, preflight
  included); one start (or wake) at a time, behind one lock. Requests for a model that is starting
  wait in its queue (``budget.queue.max_waiting``; more get 429) for at most ``budget.queue.wait_s``
  (then 503), and are forwarded once it is ready.
* Before a start, :mod:`llmdeck.gateway.budget` decides what must go; the victims stop taking requests
  at once, are drained (requests in flight finish), then stopped (or put to sleep), least recently used
  first. A model that would not fit even then is refused, with the reason, and nothing is stopped.
* Against thrash, a model ready less than ``min_resident_s`` ago (default 30, 0: off) and still in use
  is not evicted; the other's requests wait (``wait_s``) till that time is up or it idles (``IN_USE_S``).
* A failed start fails its waiting requests with the runtime's diagnosis; the other models keep
  serving. For ``failed_retry_s`` after it, requests for that model fail at once with the same text.
* A start stopped from the dashboard (``stop_asked``) ends before its launch, or at the engine's next
  readiness poll with the engine stopped: its requests get 503 ``model_start_stopped``, the lock passes
  on, and the model is stopped, not failed (the next request starts it).
* In the background: models idle past their ``ttl_s`` are stopped, and the running models' footprints
  are measured (the peak replaces the plan's estimate; the log says by how much it differed).
* A model's server started anew outside the gateway (`llmdeck restart NAME` keeps it the gateway's) is
  adopted once ready, never stopped as the old engine's leftover; a start finds one ready and adopts it.
  While it loads the model counts as starting (:mod:`llmdeck.gateway.outside`): requests wait for it as
  for a start of the gateway's own, it is not evicted, its idle TTL does not stop it, and a sleeping
  model's new server (awake) gets no wake.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from llmdeck.engines.logfiles import who_stopped
from llmdeck.errors import StartStopped
from llmdeck.gateway import lifecycle
from llmdeck.gateway.budget import gib
from llmdeck.gateway.config import LoadedConfig
from llmdeck.gateway.events import EventLog
from llmdeck.gateway.managed import Budget
from llmdeck.gateway.model_state import ManagedModel, budget_status
from llmdeck.gateway.outside import OutsideStarts
from llmdeck.gateway.refusals import Refusal, StartFailed, retrieve

log = logging.getLogger("llmdeck.gateway.models")

TICK_S = 1.0
MIN_IDLE_S = 1.0  # keep_alive 0 (Ollama's unload after the request): a request on its way is not beaten
MEASURE_EVERY_S = 5.0


class ModelManager(OutsideStarts):
    """Every managed model of a config, keyed by its backend URL."""

    def __init__(self, loaded: LoadedConfig, settings: Any) -> None:
        self.settings = settings
        self.budget: Budget = loaded.config.budget
        self.models: dict[str, ManagedModel] = {}
        for route in loaded.routes:
            for b in route.backends:
                if b.managed is not None:
                    self.models.setdefault(b.url, ManagedModel(b.managed, b.url))
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self.events = EventLog()  # starts, evictions, refusals: the dashboard's (gateway/events.py)

    # ---- requests ---------------------------------------------------------------------------

    def get(self, url: str) -> ManagedModel | None:
        return self.models.get(url)

    async def acquire(self, model: ManagedModel) -> Refusal | None:
        """Wait until ``model`` serves (starting it when needed); None: go ahead (call ``release``)."""
        if model.state == "running" and not model.queue and not await self._loads_anew(model):
            model.inflight += 1
            model.touch()
            return None
        if (failed := self._recent_failure(model)) is not None:
            return failed
        if model.waiting >= self.budget.queue.max_waiting:
            return Refusal(
                429,
                f"Model {model.name!r} is {model.state} and {model.waiting} requests already wait for it "
                f"(budget.queue.max_waiting {self.budget.queue.max_waiting}); try again shortly.",
                "queue_full",
                retry_after_s=5,
            )
        return await self._wait_turn(model, time.monotonic() + self.budget.queue.wait_s)

    def release(self, model: ManagedModel) -> None:
        model.inflight = max(0, model.inflight - 1)
        model.touch()

    async def _wait_turn(self, model: ManagedModel, deadline: float) -> Refusal | None:
        """Queue a ticket behind the model's start (making one when none is under way).

        The start grants every queued ticket a lease (``inflight``) the moment it is ready, before the
        lock passes to the next start: a model is never evicted before the requests that waited for it
        were let in (they are drained, as any busy model's are)."""
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        model.queue.append(ticket)
        try:
            task = model.task
            if task is None or task.done():
                task = model.task = asyncio.create_task(self._bring_up(model))
                task.add_done_callback(retrieve)
            timeout = max(0.0, deadline - time.monotonic())
            await asyncio.wait({ticket, task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._give_back(model, ticket)
            raise
        if ticket.done() and not ticket.cancelled():
            model.touch()
            return None
        self._give_back(model, ticket)
        if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
            if isinstance(exc, StartFailed):
                return exc.refusal
            return Refusal(503, f"Model {model.name!r} could not start: {exc}", "model_start_failed", 10)
        return Refusal(
            503,
            f"Model {model.name!r} was not ready within {self.budget.queue.wait_s:g} s "
            f"(it is {model.state}; budget.queue.wait_s).",
            "model_not_ready",
            retry_after_s=10,
        )

    @staticmethod
    def _give_back(model: ManagedModel, ticket: asyncio.Future[None]) -> None:
        """A waiter that leaves: its ticket out of the queue, or its lease back if it was granted."""
        if ticket in model.queue:
            model.queue.remove(ticket)
        if ticket.done() and not ticket.cancelled():
            model.inflight = max(0, model.inflight - 1)
        else:
            ticket.cancel()

    @staticmethod
    def _grant(model: ManagedModel) -> None:
        """The model serves: every queued request gets its lease now, in arrival order."""
        while model.queue:
            ticket = model.queue.popleft()
            if not ticket.done():
                ticket.set_result(None)
                model.inflight += 1

    def _recent_failure(self, model: ManagedModel) -> Refusal | None:
        if model.state != "failed" or model.failed_at is None:
            return None
        if time.monotonic() - model.failed_at >= self.budget.queue.failed_retry_s:
            return None
        return Refusal(503, model.last_error or "the last start failed", "model_start_failed", 10)

    # ---- starting ---------------------------------------------------------------------------

    async def _bring_up(self, model: ManagedModel) -> None:
        try:
            found = await self._follow(model)  # started anew outside the gateway (`llmdeck restart`)
            if found == "adopted":
                self._grant(model)
            elif found == "none" or not model.unwaited:  # it ended unready: started here if still wanted
                await self._bring_up_locked(model)
        finally:
            model.stop_asked = False

    async def _bring_up_locked(self, model: ManagedModel) -> None:
        async with self._lock:
            if model.state == "running":
                self._grant(model)
                return
            try:
                refusal = await self._make_room(model)
            except Exception as exc:  # an eviction that failed (Ollama did not unload, a stop raised)
                text = f"Could not make room for {model.name!r}: {lifecycle.diagnosis(exc)}"
                log.error("%s", text)
                refusal = Refusal(503, text, "eviction_failed", 10)
            if refusal is not None:
                model.fail(refusal.message, mark=refusal.code == "model_start_failed")
                raise StartFailed(refusal)
            if model.state == "sleeping":
                await self._wake(model)
            else:
                await self._start(model)
            self._grant(model)

    async def _start(self, model: ManagedModel) -> None:
        if await self._adopt_live(model, "already running"):  # not started again: it ends "already running"
            return
        model.begin_start()
        log.info("start %s: needs %s (%s)", model.name, gib(model.estimate()), model.estimate_how())
        self.events.add("start", model.name, f"needs {gib(model.estimate())} ({model.estimate_how()})")
        t0 = time.monotonic()
        try:
            record = await asyncio.to_thread(
                lifecycle.start, model.backend, self.settings, model.set_progress, lambda: model.stop_asked
            )
        except Exception as exc:
            if model.stop_asked:
                after = f"after {time.monotonic() - t0:.1f} s"
                raise StartFailed(self._stopped_start(model, after)) from exc
            if isinstance(exc, StartStopped) and await self._restarted_start(model):
                return  # `llmdeck restart NAME` stopped this start for its own, adopted once ready
            text = f"Model {model.name!r} failed to start: {lifecycle.diagnosis(exc)}"
            log.error("start %s failed after %.1f s: %s", model.name, time.monotonic() - t0, text)
            model.fail(text, mark=True)
            self.events.add("failed", model.name, text)
            raise StartFailed(Refusal(503, text, "model_start_failed", 10)) from exc
        model.running(record, time.monotonic() - t0)
        model.record_sig = lifecycle.record_sig(model.name, self.settings)
        log.info("started %s in %.1f s at %s", model.name, model.start_seconds or 0, model.url)
        self.events.add("ready", model.name, f"started in {model.start_seconds or 0:.1f} s")
        await self._measure(model)

    async def _wake(self, model: ManagedModel) -> None:
        """Wake, then prove it with a real short generation; a failure of either is a cold start."""
        level, t0 = model.backend.sleep_level or 1, time.monotonic()
        try:
            probe_s = await asyncio.to_thread(
                lifecycle.wake_checked, model.url, model.backend, level, self.settings
            )
        except Exception as exc:
            why = lifecycle.diagnosis(exc)
            log.error("wake %s failed (%s); stopping it to start afresh", model.name, why)
            model.wake_fallbacks += 1
            await self._stop(model, "wake failed")
            await self._start(model)
            model.last_wake = f"wake failed ({why[:300]}); stopped and cold-started instead"
            return
        model.woke(level, time.monotonic() - t0, probe_s)
        self.events.add("wake", model.name, model.last_wake or f"woke from sleep level {level}")
        log.info("%s: %s", model.name, model.last_wake)

    # ---- measuring, TTL, lifespan -----------------------------------------------------------

    async def _check(self, model: ManagedModel) -> None:
        """A running model whose engine died (on its own, by the watchdog, or stopped by `llmdeck down`:
        the note in its log) is stopped (its record cleared); else measured."""
        record = model.record
        if record is not None and not await asyncio.to_thread(lifecycle.still_running, record):
            newer = await asyncio.to_thread(lifecycle.successor, record, self.settings)
            if newer is not None:  # `llmdeck restart NAME` started it anew: never stopped from here
                await self._successor(model, newer)
                return
            if await self._stopped_for_restart(model, record.log_path):  # its new start comes: waited for
                return
            trip = await asyncio.to_thread(lifecycle.watchdog_trip, model.name, self.settings)
            who = None if trip else await asyncio.to_thread(who_stopped, record.log_path)
            how = trip or (f"because {who} stopped it" if who else "on its own")  # not: a `down` "on its own"
            log.warning("model %s exited %s; the next request starts it again", model.name, how)
            self.events.add("exited", model.name, f"its engine exited {how}")
            await asyncio.to_thread(lifecycle.stop, model.name, self.settings)
            model.stopped()
            model.last_error = trip or model.last_error
            return
        await self._measure(model)

    async def startup(self) -> None:
        """Adopt live servers of the configured names (an earlier gateway's), start the loop."""
        for model in self.models.values():
            await self._adopt_live(model, "already running")
        self._tasks.append(asyncio.create_task(self._loop()))

    async def _loop(self) -> None:
        last_measure = 0.0
        while True:
            await asyncio.sleep(TICK_S)
            with contextlib.suppress(Exception):
                await self._expire()
                if time.monotonic() - last_measure >= MEASURE_EVERY_S:
                    last_measure = time.monotonic()
                    for model in list(self.models.values()):
                        if model.state == "running":
                            await self._check(model)
                        elif model.state == "starting" and model.outside and not model.bringing_up:
                            await self._settle_outside(model)
                        elif model.state in {"stopped", "failed"} and not model.bringing_up:
                            await self._adopt_live(model, "started again outside the gateway", own=True)

    async def _expire(self) -> None:
        for model in self.models.values():
            limit = model.idle_limit()
            if limit is None or math.isinf(limit) or model.state != "running" or model.busy():
                continue
            if model.idle_s() < (limit if model.keep_alive_s is None else max(limit, MIN_IDLE_S)):
                continue
            if self._lock.locked():
                return  # a start is under way: look again on the next tick
            async with self._lock:
                # a server started anew (still loading, or not adopted yet) is not the idle one: kept
                if model.state == "running" and not model.busy() and not await self._restarted(model):
                    how = (
                        f"ttl_s {limit:g}"
                        if model.keep_alive_s is None
                        else f"keep_alive {limit:g} s (Ollama's)"
                    )
                    log.info("evict %s: idle %.0f s, past its %s", model.name, model.idle_s(), how)
                    await self._evict(model, f"after {how}")

    async def shutdown(self) -> None:
        """Stop the loop and every model this gateway runs (as llama-swap does on exit)."""
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        held = [m for m in self.models.values() if m.state in {"running", "sleeping", "starting", "stopping"}]
        await asyncio.gather(*(self._stop(m, "gateway shutting down") for m in held), return_exceptions=True)

    def status(self) -> dict[str, Any]:
        """``/gateway/status``'s budget and models (state, memory planned / measured, last use, queue)."""
        return budget_status(self.budget, list(self.models.values()))
