"""The dashboard's actions on a model on demand: start, stop (drain first), sleep, wake.

A stop of a model that is starting ends that start, without the lock the start holds: before the
launch nothing is started, after it the engine is stopped at its next readiness poll (0.5 s).

Each reuses the manager's own steps, behind its one lock (one start or eviction at a time): a start or
a wake is the same bring-up as a request's (``_bring_up``: the budget decides what must go first), a
stop is the eviction path (no new requests, the ones in flight finish, then ``runtime.service.down``),
a sleep is the eviction path of a ``sleep_level:`` backend. The HTTP call returns at once (202); the
state endpoint shows the progress and the manager's events say how it ended.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from llmdeck.errors import InternalError
from llmdeck.gateway.manager import ModelManager
from llmdeck.gateway.model_state import ManagedModel
from llmdeck.gateway.refusals import retrieve
from llmdeck.gateway.ui_schema import Action
from llmdeck.gateway.ui_state import actions_for

log = logging.getLogger("llmdeck.gateway.models")
WHY = "on request from the dashboard"


class ActionRefused(InternalError):
    """The action does not apply to the model now (HTTP 409), with the reason."""


def find(manager: ModelManager, name: str) -> ManagedModel | None:
    return next((m for m in manager.models.values() if m.name == name), None)


def begin(
    manager: ModelManager, model: ManagedModel, action: Action, tasks: set[Any], why: str = WHY
) -> None:
    """Start ``action`` in the background, or raise :class:`ActionRefused` saying why it cannot.
    ``why``: the reason the events and the log give (the dashboard, or an Ollama client's keep_alive)."""
    allowed = actions_for(model)
    if action not in allowed:
        can = ", ".join(allowed) or "nothing until it settles"
        raise ActionRefused(f"Model {model.name!r} is {model.state}: {action} does not apply (now: {can}).")
    log.info("%s %s (%s)", action, model.name, why)
    if action == "stop" and model.state in {"starting", "stopped", "failed"}:
        model.stop_asked = True  # the start's own task ends it (manager._stopped_start): no lock to wait for
        if model.outside and not model.bringing_up:  # loading outside the gateway, no request waits: a
            _bring_up(manager, model)  # bring-up follows it, and stops it (outside._stop_outside)
        return
    if action in {"start", "wake"}:
        if not model.bringing_up:  # the manager's own start: a request that joins it gets its
            model.asked = True  # failure's words (the diagnosis), and a residency is waited out
            _bring_up(manager, model).add_done_callback(lambda _task: setattr(model, "asked", False))
        return
    job = asyncio.create_task(_stop(manager, model, why) if action == "stop" else _sleep(manager, model, why))
    tasks.add(job)
    job.add_done_callback(tasks.discard)


def _bring_up(manager: ModelManager, model: ManagedModel) -> asyncio.Task[None]:
    task = model.task = asyncio.create_task(manager._bring_up(model))
    task.add_done_callback(retrieve)
    return task


def keep_alive(
    manager: ModelManager, model: ManagedModel, unload: bool, tasks: set[Any], why: str
) -> Action | None:
    """Ollama's load (a request with no prompt) and unload (``keep_alive: 0``) of a model on demand:
    unload sleeps it where it can sleep, else stops it; load wakes or starts it. What it began (None:
    nothing to do, e.g. already stopped, or settling)."""
    can = actions_for(model)
    wanted: Action = (
        ("sleep" if "sleep" in can else "stop") if unload else ("wake" if "wake" in can else "start")
    )
    if wanted not in can:
        return None
    begin(manager, model, wanted, tasks, why)
    return wanted


async def _stop(manager: ModelManager, model: ManagedModel, why: str) -> None:
    async with manager._lock:
        if model.state == "running":
            model.state = "stopping"
            deadline = asyncio.get_running_loop().time() + manager.budget.queue.wait_s
            while model.inflight > 0 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.2)
        if model.state in {"stopping", "sleeping"}:
            await manager._stop(model, why)


async def _sleep(manager: ModelManager, model: ManagedModel, why: str) -> None:
    async with manager._lock:
        if model.state == "running" and model.backend.sleep_level:
            await manager._evict(model, why)
