"""Let a server's requests finish before it is stopped (`llmdeck restart`: 60 s at most; `down`: 20 s).

A stop sends the engine SIGTERM. vLLM (0.32, measured on the CPU engine: `evidence/lifecycle/drain/`)
then ends its engine at once: a request it was running never ends, a stream stops mid-answer with no
`[DONE]` and no finish reason, a whole answer's connection drops with no reply, and its HTTP server
waits for those connections till llmdeck's grace (20 s) runs out and kills it. A coding agent's turn
that was running is lost, and `down` takes 20 s.

Draining first: the server's own ``/metrics`` (``vllm:num_requests_running`` + ``_waiting``; SGLang's and
llama.cpp's names too) is read every ``POLL_S`` until none is left or ``limit_s`` is spent, then the stop
goes on. Requests that come in meanwhile are served (and waited for) too; a gateway in front holds the
ones that come after the stop for the new start (`gateway/comeback.py`). A server whose metrics cannot
be read (dead, wedged, not ready, no metrics) has nothing to wait for: the stop goes on at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.runtime.events import EventClock
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.runtime.status import scrape_live_metrics

POLL_S = 0.25
HOLD_S = 2.5  # a restart's drain lasts this long at least: a gateway looks each second (comeback.py)
READ_S = 2.0  # a wedged server (it accepts, never answers) costs one such read: nothing is waited for


class Drained(BaseModel):
    """What a drain found: the requests it waited for and those still running when it gave up."""

    busy: int | None = Field(description="Requests running or waiting when first seen; None: not readable.")
    left: int = Field(0, description="Still running or waiting when the limit ran out (they are cut).")
    waited_s: float = 0.0


def in_flight(base_url: str) -> int | None:
    """Requests the server is running or holding in its queue now; None: its metrics cannot be read."""
    live = scrape_live_metrics(base_url, limit_s=READ_S)
    if live is None or "running" not in live:
        return None
    return round(live["running"] + live.get("waiting", 0.0))


def drain(
    record: ServerRecord,
    limit_s: float,
    on_busy: Callable[[int], None] = lambda _: None,
    *,
    at_least_s: float = 0.0,
    read: Callable[[str], int | None] | None = None,
) -> Drained:
    """Wait (at most ``limit_s``) till ``record``'s server runs no request, and ``at_least_s`` has passed
    (requests a gateway sent before it held them reach the engine meanwhile); ``on_busy(n)`` once, when
    it has some. Returns at once for a server not ready or whose metrics cannot be read."""
    t0, read = time.monotonic(), read or in_flight
    if limit_s <= 0 or record.ready_at is None:
        return Drained(busy=None)
    busy = now = read(record.base_url)
    if busy:
        on_busy(busy)
    while now is not None and (now or time.monotonic() - t0 < at_least_s) and time.monotonic() - t0 < limit_s:
        time.sleep(min(POLL_S, max(0.0, limit_s - (time.monotonic() - t0))))
        now = read(record.base_url)
        if now and not busy:
            busy = now
            on_busy(now)
    return Drained(busy=busy, left=now or 0, waited_s=round(time.monotonic() - t0, 2))


def let_finish(record: ServerRecord, limit_s: float, clock: EventClock, who: str | None = None) -> Drained:
    """:func:`drain`, saying what is waited for and how it ended (``draining`` events). A stale record
    (its pid another program's now) is not read: what answers on its port is not its server. ``who``
    (a restart) is noted in its log first, as the stop's note: a gateway in front holds the requests
    that come from then on for the new start (gateway/comeback.py), so steady traffic ends too."""
    from llmdeck.engines.logfiles import note, note_stop
    from llmdeck.runtime.engine_state import is_alive

    if limit_s <= 0 or not is_alive(record):
        return Drained(busy=None)
    if who is not None:
        note_stop(record.log_path, who)

    def busy(n: int) -> None:
        clock.emit("draining", f"{record.name}: {n} request(s) running; waiting up to {limit_s:g} s", busy=n)

    try:  # noted: a gateway's next look (a second at most) holds new requests; sent ones are waited for
        done = drain(record, limit_s, busy, at_least_s=HOLD_S if who is not None else 0.0)
    except BaseException:  # Ctrl-C: the server runs on, and its log must not say who stopped it
        if who is not None:
            note(record.log_path, f"kept running: {who} ended before it stopped the server")
        raise
    if done.busy:
        left = f"{done.left} still running, cut by the stop" if done.left else "all finished"
        clock.emit("draining", f"{record.name}: {left} after {done.waited_s:.1f} s", **done.model_dump())
    return done


def let_all_finish(servers_dir: Path, limit_s: float, clock: EventClock) -> None:
    """:func:`let_finish` for every recorded server: ``limit_s`` at most, all told (they drain together)."""
    until = time.monotonic() + limit_s
    for record in StateStore(servers_dir).list() if limit_s > 0 else []:
        let_finish(record, until - time.monotonic(), clock)
