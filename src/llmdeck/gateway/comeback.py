"""A `server:` backend that `llmdeck restart NAME` brings back: its requests wait for it, not a 503.

`llmdeck restart NAME` stops the server and starts it again: ~35 s on the CPU engine, minutes for a big
model on a GPU. A request in that gap had got the all-down 503 (`backend_down`) at once, or the 502 once
the refused-connection retries (retry.py, 5 s) were up, and the SDKs' two retries were spent long before
the server was back. Now, while the backend's server is coming back, a request waits for it, probing each
second, for ``timeouts.restart_wait_s`` at most (900 s, as a model on demand's queue; 0: the 503 at
once), and is sent when it answers. Coming back means:

* a `llmdeck restart NAME` that stopped it runs still (its note in the stopped server's log, as the
  models on demand read it: gateway/outside.py), the seconds before its new record;
* or a start of it is alive and not ready yet (its record: the new start loads).

A restart that ends without a server (its start failed), a server that is up but does not answer, or a
client that hangs up ends the wait at once. A `url:` backend has no record to follow: unchanged. What is
read (the record, the log's last note) is read again once a second per server, however many requests
wait, or at once when either file changed (two stats a request to a backend that is down).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from llmdeck.gateway.hangup import HUNG_UP, Gone, unless_gone

if TYPE_CHECKING:
    import httpx

    from llmdeck.gateway.backend_config import ResolvedBackend
    from llmdeck.gateway.follow import Follow
    from llmdeck.gateway.routing import BackendState, Router

log = logging.getLogger("llmdeck.gateway")

POLL_S = 1.0  # between looks (and probes) while a server comes back
HELD = "its server is being restarted (`llmdeck restart`): new requests wait for its new start"
_looked: dict[str, float] = {}  # a `server:` backend's URL -> when hold_drained last looked at it
Stamp = tuple[tuple[int, int] | None, tuple[int, int] | None]  # the record's and the log's (file_stamp)
_seen: dict[str, tuple[float, Stamp, bool]] = {}  # server's record path -> (when looked, stamp, back)


def coming_back(backend: ResolvedBackend) -> bool:
    """Whether the backend's llmdeck server is on its way back (a restart runs, or a start loads)."""
    follow = backend.follow
    if follow is None:
        return False
    from llmdeck.gateway.lifecycle import live_in

    if (record := live_in(follow.servers_dir, follow.server)) is not None and record.ready_at is None:
        return True  # its new start loads
    return restart_stopping(backend)  # a ready one answers its probe, unless a restart is stopping it


async def hold_drained(states: list[BackendState]) -> None:
    """Before a request is sent: a `server:` backend whose restart lets it finish its requests
    (:func:`drained`) is marked down, so the request waits for the new start (the all-down check's
    wait). Looked at once a second a backend at most, by the request that comes then (~1 ms); the
    restart's drain lasts long enough for that look (runtime/drain.py's HOLD_S)."""
    now = time.monotonic()
    for state in states:
        if state.backend.follow is None or not state.healthy or now - _looked.get(state.url, 0.0) < POLL_S:
            continue
        _looked[state.url] = now
        if await asyncio.to_thread(drained, state.backend):
            state.mark_down(HELD)
            state.checked_at = time.time()


def drained(backend: ResolvedBackend) -> bool:
    """Whether a `llmdeck restart` lets the backend's running server finish its requests before it stops
    it (runtime/drain.py): the server answers still, but new requests are held for the new start (the
    probe keeps the backend down). Once it is stopped its probes fail as they did."""
    if backend.follow is None:
        return False
    from llmdeck.gateway.lifecycle import live_in

    if not restart_stopping(backend):  # the log's last note first (~1 ms): the record's look may ask docker
        return False
    record = live_in(backend.follow.servers_dir, backend.follow.server)
    return record is not None and record.ready_at is not None


def restart_stopping(backend: ResolvedBackend) -> bool:
    """Whether a `llmdeck restart` is stopping the backend's server (its note in the server's log, its
    process alive): letting the requests it runs finish first (runtime/drain.py), or stopped, its new
    start not recorded yet."""
    follow = backend.follow
    if follow is None or follow.logs_dir is None:
        return False
    from llmdeck.gateway.lifecycle import restarting

    return restarting(follow.server, follow.logs_dir / f"{follow.server}.log") is not None


async def any_back(states: list[BackendState]) -> bool:
    """Whether one of these backends is coming back; looked at once a second per server at most."""
    now, found = time.monotonic(), False
    for state in states:
        follow = state.backend.follow
        if follow is None:
            continue
        key = str(follow.servers_dir / follow.server)
        when, stamp, back = _seen.get(key, (0.0, (None, None), False))
        if (fresh := _stamp(follow)) != stamp or now - when >= POLL_S:
            was, back = back, await asyncio.to_thread(coming_back, state.backend)
            _seen[key] = (now, fresh, back)
            if back and not was:
                log.info(
                    "backend %s: its server is being restarted; its requests wait for it", state.backend.label
                )
        found = found or back
    return found


def _stamp(follow: Follow) -> Stamp:
    """The record's and the log's identity now: a restart writes one of them (its note, its record)."""
    from llmdeck.gateway.lifecycle import record_stamp
    from llmdeck.util.localfile import file_stamp

    log_path = follow.logs_dir / f"{follow.server}.log" if follow.logs_dir is not None else None
    return record_stamp(follow.servers_dir, follow.server), file_stamp(log_path) if log_path else None


def waiter(
    client: httpx.AsyncClient,
    router: Router,
    states: list[BackendState],
    probe_timeout_s: float,
    wait_s: float,
    gone: Gone,
) -> Callable[[], Awaitable[bool | None]]:
    """The all-down check's last step (proxy.all_down): wait while a backend comes back; True once one
    answers its probe, False (the 503) when none is coming back or the time is up, None when the client
    hung up meanwhile (``gone`` returns then)."""

    async def back() -> bool:
        deadline, waited = time.monotonic() + wait_s, False
        while time.monotonic() < deadline and await any_back(states):
            waited = True
            await asyncio.sleep(POLL_S)
            if await router.recheck(client, states, probe_timeout_s):
                return True
        if not waited:
            return False
        # no longer coming back: it may be back (ready since the last probe, which it had failed): asked
        # once more, a second on (a 503 had ended a 29 s wait while the restarted server was ready)
        await asyncio.sleep(POLL_S)
        return await router.recheck(client, states, probe_timeout_s)

    async def wait() -> bool | None:
        if wait_s <= 0:
            return False
        answer = await unless_gone(back(), gone)
        return None if answer is HUNG_UP else answer

    return wait
