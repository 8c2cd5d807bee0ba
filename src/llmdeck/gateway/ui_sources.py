"""What the dashboard reads besides the manager: host memory, NVML, Ollama, other servers, route rates.

Every blocking read (``/proc``, NVML, Ollama's HTTP API, the server records, the process trees' PSS)
runs in a worker thread behind :class:`Cached`: the first call waits for it (bounded), later ones get
the last value at once and refresh it in the background once it is older than its TTL — so a poll of
``/ui/api/state`` never blocks the event loop and a slow Ollama never delays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from llmdeck.gateway.metrics import GatewayMetrics

T = TypeVar("T")
FIRST_WAIT_S = 2.0
OLLAMA_MAX_BODY = 4 << 20
OLLAMA_LIMIT_S = 3.0  # one /api/ps exchange as a whole (Ollama answers in milliseconds)
WINDOW_S = 60.0


class Cached(Generic[T]):
    """A blocking ``fn``'s last value, refreshed in a thread when older than ``ttl_s``."""

    def __init__(self, fn: Callable[[], T], ttl_s: float, default: T) -> None:
        self.fn, self.ttl_s, self.value = fn, ttl_s, default
        self.at: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def _refresh(self) -> None:
        with contextlib.suppress(Exception):  # a source that fails keeps its last value
            self.value = await asyncio.to_thread(self.fn)
        self.at = time.monotonic()

    async def get(self) -> T:
        running = self._task is not None and not self._task.done()
        if self.at is None or (time.monotonic() - self.at >= self.ttl_s and not running):
            if not running:
                self._task = asyncio.create_task(self._refresh())
            if self.at is None and self._task is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._task), FIRST_WAIT_S)
        return self.value


@dataclass(frozen=True)
class ServerMemory:
    """A running llmdeck server that is not one of this gateway's models on demand."""

    name: str
    bytes: int


def read_meminfo() -> Any:
    from llmdeck.runtime.host import read_meminfo as read

    return read()


def read_nvml() -> Any:
    from llmdeck.runtime.host import nvml_snapshot

    return nvml_snapshot()


def read_ollama(host: str = "127.0.0.1", port: int = 11434) -> list[tuple[str, int, int]]:
    """Ollama's loaded models (``GET /api/ps``): (name, bytes, bytes on the GPU); none without Ollama.

    Plain ``http.client`` rather than ``tenants.ollama_ps``: its httpx client builds a TLS context on
    every call (26 ms of CPU here), which at one call every 10 s was most of what a dashboard poll cost.
    Each socket step is bounded (1 s), the body too (4 MiB), and the whole exchange (``OLLAMA_LIMIT_S``:
    a timer hangs up on a peer that trickles, whose every read returns in time, which had held the
    worker thread for ever, and the gateway's shutdown with it); it runs in a worker thread."""
    import http.client
    import threading

    from llmdeck.runtime.tenants import parse_ollama_ps
    from llmdeck.util.jsonsafe import loads

    conn = http.client.HTTPConnection(host, port, timeout=1.0)
    cut = threading.Timer(OLLAMA_LIMIT_S, _hang_up, (conn,))
    cut.daemon = True
    cut.start()
    try:
        conn.request("GET", "/api/ps")
        resp = conn.getresponse()
        body = resp.read(OLLAMA_MAX_BODY + 1)
        if resp.status != 200 or len(body) > OLLAMA_MAX_BODY:
            return []
        models = parse_ollama_ps(loads(body))
    except (OSError, ValueError, http.client.HTTPException):
        return []
    finally:
        cut.cancel()
        conn.close()
    return [(m.name, m.size, m.size_vram) for m in models]


def _hang_up(conn: Any) -> None:
    """End ``conn``'s exchange now: a read blocked on its socket returns at once (end of stream)."""
    import socket

    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def other_servers(servers_dir: Any, skip: frozenset[str]) -> Callable[[], list[ServerMemory]]:
    """The live llmdeck servers of this state folder but ``skip`` (the managed ones), with their PSS."""

    def read() -> list[ServerMemory]:
        from llmdeck.gateway.footprint import measure
        from llmdeck.runtime.engine_state import is_alive
        from llmdeck.runtime.state import StateStore

        out = []
        for record in StateStore(servers_dir).list():
            if record.name in skip or not is_alive(record):
                continue
            out.append(ServerMemory(record.name, measure(record.pid, "unified") or 0))
        return out

    return read


# ---- route rates and TTFT from the gateway's own metrics --------------------------------------------


@dataclass
class RouteSample:
    requests: float = 0.0
    in_flight: float = 0.0
    prompt: float = 0.0
    completion: float = 0.0
    ttft: dict[float, float] = field(default_factory=dict)  # upper bound -> cumulative count


def sample_routes(metrics: GatewayMetrics) -> dict[str, RouteSample]:
    """Per route: requests, tokens and the TTFT histogram, summed over keys and statuses (revoked keys'
    too: their series left /metrics, what they counted stays in the totals)."""
    out: dict[str, RouteSample] = {}
    for route, kept in metrics.retired.items():
        r = out.setdefault(route, RouteSample())
        r.requests, r.prompt, r.completion = (kept.get(k, 0.0) for k in ("requests", "prompt", "completion"))
    for route, buckets in metrics.retired_ttft.items():
        out.setdefault(route, RouteSample()).ttft = dict(buckets)
    for family in metrics.requests.collect():
        for s in family.samples:
            if s.name.endswith("_total"):
                r = out.setdefault(s.labels["route"], RouteSample())
                r.requests += s.value
    for family in metrics.tokens.collect():
        for s in family.samples:
            if s.name.endswith("_total"):
                r = out.setdefault(s.labels["route"], RouteSample())
                if s.labels["kind"] == "prompt":
                    r.prompt += s.value
                else:
                    r.completion += s.value
    for family in metrics.in_flight.collect():
        for s in family.samples:
            out.setdefault(s.labels["route"], RouteSample()).in_flight = s.value
    for family in metrics.ttft.collect():
        for s in family.samples:
            if s.name.endswith("_bucket"):
                r = out.setdefault(s.labels["route"], RouteSample())
                le = float(s.labels["le"])
                r.ttft[le] = r.ttft.get(le, 0.0) + s.value
    return out


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """``histogram_quantile`` over cumulative bucket counts (linear within a bucket), in seconds."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = bound, count
    return lower


class RouteWindow:
    """Samples of the route metrics (at most one a second), to turn counters into rates over ~60 s."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, dict[str, RouteSample]]] = deque()

    def update(self, metrics: GatewayMetrics) -> tuple[float, dict[str, RouteSample], dict[str, RouteSample]]:
        """(seconds covered, now, then): the newest sample and the oldest within the window."""
        now = time.monotonic()
        if not self.samples or now - self.samples[-1][0] >= 1.0:
            self.samples.append((now, sample_routes(metrics)))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window_s:
            self.samples.popleft()
        t0, then = self.samples[0]
        t1, latest = self.samples[-1]
        return t1 - t0, latest, then


def delta(now: RouteSample, then: RouteSample | None) -> RouteSample:
    if then is None:
        return now
    return RouteSample(
        requests=now.requests - then.requests,
        in_flight=now.in_flight,
        prompt=now.prompt - then.prompt,
        completion=now.completion - then.completion,
        ttft={le: c - then.ttft.get(le, 0.0) for le, c in now.ttft.items()},
    )
