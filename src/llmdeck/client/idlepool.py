"""The keep-alive connections of the lean transport (transport.py) that wait for their next request.

Without a cap or an expiry the pool kept every connection a burst had opened, for as long as the
process ran: a gateway that once relayed 256 requests at a time held 256 idle sockets to that backend
(and their buffers) for good. Now a host keeps at most ``most`` idle connections (the longest idle one
is closed past that), and one idle ``expiry_s`` is closed, by one timer for the whole pool (nothing
more per request than a clock read). ``EXPIRY_S`` is under vLLM's (uvicorn's) server-side keep-alive of
5 s (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``): a connection the client reuses just as the server closes it
breaks under the request; closed here first, that race is gone.
"""

from __future__ import annotations

import asyncio
from typing import Generic, Protocol, TypeVar

Key = tuple[str, str, int]  # scheme, host, port

MOST = 64  # idle connections kept per host
EXPIRY_S = 4.0  # an idle connection is closed after this long (the server closes its own at 5 s)


class Idle(Protocol):
    """What the pool needs of a connection (transport._Conn)."""

    loop: asyncio.AbstractEventLoop
    idle_since: float

    @property
    def usable(self) -> bool: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=Idle)


class IdlePool(Generic[C]):
    """Idle connections per host, the longest idle first; see the module's doc."""

    def __init__(self, most: int = MOST, expiry_s: float = EXPIRY_S) -> None:
        self.most, self.expiry_s = most, expiry_s
        self._idle: dict[Key, list[C]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def take(self, key: Key) -> C | None:
        """The connection idle the shortest time that is still good, None when there is none."""
        idle = self._idle.get(key)
        while idle:
            c = idle.pop()
            if c.usable and c.loop.time() - c.idle_since < self.expiry_s:
                return c
            c.close()
        return None

    def put(self, key: Key, conn: C) -> None:
        conn.idle_since = now = conn.loop.time()
        idle = self._idle.setdefault(key, [])
        idle.append(conn)
        if len(idle) > self.most:
            idle.pop(0).close()
        if self._timer is None:
            self._timer = conn.loop.call_at(now + self.expiry_s, self._expire, conn.loop)

    def count(self) -> int:
        return sum(len(idle) for idle in self._idle.values())

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close what has been idle ``expiry_s`` (or was closed by its server); again at the next due."""
        self._timer = None
        now, due = loop.time(), None
        for key, idle in list(self._idle.items()):
            keep = []
            for c in idle:
                if c.usable and now - c.idle_since < self.expiry_s - 1e-3:
                    keep.append(c)
                else:
                    c.close()
            if keep:
                self._idle[key] = keep
                first = keep[0].idle_since + self.expiry_s
                due = first if due is None else min(due, first)
            else:
                del self._idle[key]
        if due is not None:
            self._timer = loop.call_at(due, self._expire, loop)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for idle in self._idle.values():
            for c in idle:
                c.close()
        self._idle.clear()
