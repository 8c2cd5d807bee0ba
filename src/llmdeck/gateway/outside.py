"""A managed model's server started anew outside the gateway (`llmdeck restart NAME`): followed, adopted.

`llmdeck restart NAME` of a gateway model stops its engine and starts another, still the gateway's. While
that start loads, the model counts as ``starting``, as if the gateway had started it: its requests wait in
its queue (``budget.queue.wait_s``, then 503 ``model_not_ready`` with Retry-After; they had been sent to
the loading server, a 502 "cannot connect"), it is not evicted for another model (its memory is not
settled: an idle one goes instead, else the other model is refused and told why), and its idle TTL does not
stop it. Once ready it is adopted. A start that ends before it is ready (its record gone) leaves the model
stopped; requests still waiting for it get a start of the gateway's own.

The restart's own seconds between its stop and its new record (the memory settles, the preflight runs) are
part of it: the note it leaves in the old server's log (``stopping: `llmdeck restart NAME` (pid N)``), while
that command runs, makes the model starting too, and a start of the gateway's own that the restart stopped
is followed, not failed.

Found at a request (its record file changed since it was read: one stat per request), when an eviction
counts what the models hold, and at the manager's checks. A stop from the dashboard while such a start
loads stops it (`llmdeck down NAME`: its server is the gateway's), as it stops a start of the gateway's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Literal

from llmdeck.engines.process import pid_alive
from llmdeck.gateway import lifecycle
from llmdeck.gateway.budget import Tenant
from llmdeck.gateway.model_state import ManagedModel
from llmdeck.gateway.refusals import Refusal, StartFailed, retrieve
from llmdeck.gateway.room import RoomMaker
from llmdeck.runtime.state import ServerRecord

log = logging.getLogger("llmdeck.gateway.models")

POLL_S = 1.0  # how often a start outside the gateway is asked whether it is ready
AGAIN = "started again outside the gateway"


class OutsideStarts(RoomMaker):
    """The manager's side of starts it did not make (:class:`llmdeck.gateway.manager.ModelManager`)."""

    async def _tenants(self, starting: ManagedModel) -> list[Tenant]:
        """What the models hold, once every running one restarted outside and loading counts as starting
        (it is not evicted: its memory is not settled)."""
        for model in list(self.models.values()):
            if model is not starting:
                await self._loads_anew(model)
        return await super()._tenants(starting)

    async def _newer(self, model: ManagedModel) -> ServerRecord | None:
        """Its server started anew outside the gateway at its URL, ready or loading; else None."""
        if model.record is not None:
            newer = await asyncio.to_thread(lifecycle.successor, model.record, self.settings)
        else:
            newer = await asyncio.to_thread(lifecycle.live_record, model.name, self.settings)
        return newer if newer is not None and newer.base_url == model.url else None

    async def _loads_anew(self, model: ManagedModel) -> bool:
        """A running model whose server was started anew outside the gateway and still loads: it counts
        as starting from now on (True). A ready one is adopted. Asked only when its record file changed;
        a request that comes while that look is under way waits for it (it had been let in: the first
        request had noted the change, the model still "running"), then finds the model as it left it."""
        look = model.look
        if look is None or look.done():
            sig = lifecycle.record_sig(model.name, self.settings)
            if model.state != "running" or sig == model.record_sig:
                return False
            model.record_sig = sig
            look = model.look = asyncio.create_task(self._look(model))
            look.add_done_callback(retrieve)  # every request that waited for it hung up: not left unread
        await asyncio.shield(look)  # one waiter's cancel (its client hung up) is not the others'
        return model.state != "running"

    async def _look(self, model: ManagedModel) -> None:
        """What :meth:`_loads_anew` found: a start outside (adopted, or loading: starting), or none."""
        newer, record = await self._newer(model), model.record
        if model.state != "running":
            return
        if newer is None:  # no new start yet: a `llmdeck restart NAME` that stopped it brings one soon
            if record is not None:
                await self._stopped_for_restart(model, record.log_path)
        elif newer.ready_at is not None:
            await self._adopt(model, newer, AGAIN)
        else:
            self._loading(model, newer)

    async def refused(self, model: ManagedModel) -> None:
        """Its server refused a request's connection: one a `llmdeck restart NAME` is stopping (the note
        in its log, the restart running) counts as starting from now, its record not gone yet (the old
        engine's stop lasts up to its grace period while requests it took are still open)."""
        if model.state == "running" and model.record is not None:
            await self._stopped_for_restart(model, model.record.log_path)

    def _loading(self, model: ManagedModel, newer: ServerRecord | None) -> None:
        if newer is not None:
            what = f"{AGAIN} (pid {newer.pid}): loading"
        else:
            what = f"stopped by `llmdeck restart {model.name}` (pid {model.restart_pid}): its new start comes"
        if not model.outside:
            log.info("model %s was %s; its requests wait for it", model.name, what)
            self.events.add("start", model.name, what)
        model.state, model.outside, model.progress = "starting", True, what

    def _restarting(self, model: ManagedModel) -> bool:
        """The `llmdeck restart NAME` that stopped its server runs still: its new start is on its way."""
        return model.restart_pid is not None and pid_alive(model.restart_pid)

    async def _stopped_for_restart(self, model: ManagedModel, log_path: Path) -> bool:
        """Its server was stopped by a `llmdeck restart NAME` that runs still (the note in its log): the
        model counts as starting (True) until that new start is ready or the restart ends without it."""
        pid = await asyncio.to_thread(lifecycle.restarting, model.name, log_path)
        if pid is None:
            return False
        model.restart_pid = pid
        self._loading(model, None)
        return True

    async def _restarted_start(self, model: ManagedModel) -> bool:
        """A start of the gateway's own that `llmdeck restart NAME` stopped: its new start is followed
        and adopted (True), not a failure."""
        log_path = self.settings.logs_dir / f"{model.name}.log"
        return await self._stopped_for_restart(model, log_path) and await self._follow(model) == "adopted"

    async def _follow(self, model: ManagedModel) -> Literal["adopted", "none", "ended"]:
        """A bring-up's first step: a start outside the gateway (ready or loading) is waited for, up to
        the model's start timeout, and adopted; "none" when there is none, "ended" when it ended unready."""
        newer = await self._newer(model)
        if newer is None and not self._restarting(model):
            if not model.outside:
                return "none"
            self._ended(model)  # it ended before this look
            return "ended"
        limit = model.backend.start_timeout_s or self.settings.ready_timeout_s
        deadline = time.monotonic() + limit
        while (newer is None or newer.ready_at is None) and not model.stop_asked:
            self._loading(model, newer)
            if time.monotonic() > deadline:
                text = f"Model {model.name!r} was {AGAIN} and was not ready within {limit:g} s."
                model.fail(text, mark=True)
                self.events.add("failed", model.name, text)
                raise StartFailed(Refusal(503, text, "model_start_failed", 10))
            await asyncio.sleep(POLL_S)
            if (newer := await self._newer(model)) is None and not self._restarting(model):
                self._ended(model)
                return "ended"
        if model.stop_asked:
            raise StartFailed(await self._stop_outside(model))
        assert newer is not None
        await self._adopt(model, newer, AGAIN)
        return "adopted"

    async def _stop_outside(self, model: ManagedModel) -> Refusal:
        """The dashboard stopped the model's start made outside the gateway: its new server is the
        gateway's (`llmdeck restart NAME` keeps it so), stopped as the gateway stops its own (`llmdeck
        down NAME`), once the restart saved its record (its stop's seconds are waited out); the model is
        stopped, its waiting requests get 503 model_start_stopped."""
        while (newer := await self._newer(model)) is None and self._restarting(model):
            await asyncio.sleep(POLL_S)
        outcome = "no server left to stop"
        if newer is not None:
            outcome = await asyncio.to_thread(lifecycle.stop, model.name, self.settings)
        return self._stopped_start(model, f"while it loaded, started again outside the gateway ({outcome})")

    def _ended(self, model: ManagedModel) -> None:
        log.warning("model %s: its start outside the gateway ended before it was ready", model.name)
        self.events.add("exited", model.name, "its start outside the gateway ended before it was ready")
        model.stopped()

    async def _settle_outside(self, model: ManagedModel) -> None:
        """The manager's check of a model loading outside that no request waits for: adopted once ready."""
        newer = await self._newer(model)
        if newer is None:
            if not self._restarting(model):
                self._ended(model)
        elif newer.ready_at is not None:
            await self._adopt(model, newer, AGAIN)

    async def _successor(self, model: ManagedModel, newer: ServerRecord) -> None:
        """Its engine was started anew outside the gateway: adopted once ready (a start that fails
        leaves no record; the next check then finds it gone); one at another URL is not this route's."""
        if newer.base_url != model.url:
            log.warning("model %s was started again at %s, not at %s: not adopted", model.name,
                        newer.base_url, model.url)  # fmt: skip
            self.events.add("exited", model.name, f"started again at {newer.base_url}: not adopted")
            model.stopped()
        elif newer.ready_at is not None:
            await self._adopt(model, newer, AGAIN)
        else:
            self._loading(model, newer)

    async def _restarted(self, model: ManagedModel) -> bool:
        """Its server was started anew outside the gateway since its record was read (``_successor``:
        adopted when ready, else loading); True when there is such a start."""
        record = model.record
        newer = await asyncio.to_thread(lifecycle.successor, record, self.settings) if record else None
        if newer is None:
            return False
        await self._successor(model, newer)
        return True

    async def _adopt(self, model: ManagedModel, record: ServerRecord, how: str) -> None:
        model.running(record, None)
        model.record_sig = lifecycle.record_sig(model.name, self.settings)
        log.info("adopted %s: %s, running at %s (pid %s)", model.name, how, model.url, record.pid)
        self.events.add("adopted", model.name, f"{how} (pid {record.pid})")
        await self._measure(model)

    async def _adopt_live(self, model: ManagedModel, how: str, *, own: bool = False) -> bool:
        """Adopt a live, ready server of the model's name at its URL (``own``: only one the gateway
        started, e.g. one `llmdeck restart NAME` started anew while the model counted as stopped)."""
        record = await asyncio.to_thread(lifecycle.alive_record, model.name, self.settings)
        if record is None or record.base_url != model.url or (own and record.started_by != "gateway"):
            return False
        await self._adopt(model, record, how)
        return True
