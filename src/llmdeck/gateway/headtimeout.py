"""Client connections that never finish a request's head are closed; uvicorn kept them for ever.

uvicorn's keep-alive timeout runs only once a response is complete, and the first byte of the next
request cancels it: a connection that sends nothing, or part of a head, held its socket (a file
descriptor) and its protocol object until the peer closed it. A client that vanished without a FIN
(a laptop put to sleep, a NAT that forgot the flow) or one that opens connections and sends nothing
left them piling up over an uptime (measured: 200 such connections, every one still open 70 s later).
Now a connection that is between requests (just opened, or its last response sent and a byte of the
next head come) has :data:`HEAD_TIMEOUT_S` to complete a head; a request being served is never cut
(its body has ``read_body``'s timeouts, its reply the relay's).

A client that stops reading a reply (a stopped or wedged process: its socket stays open with a zero
window, which the kernel never times out) had held its request for ever: the relay waits to write, so it
stops reading the backend and the backend's idle timeout never fires (measured with the soak: six such
clients held 6 requests, 12 fds, 18 tasks and 6 backend connections for as long as they stayed). Now a
connection whose writes have been paused (the client's buffers full) for ``stall_s`` is aborted; the
relay then sees the disconnect and closes the backend's request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

HEAD_TIMEOUT_S = 30.0  # as uvicorn's keep-alive (serve.py): a head takes a client milliseconds
log = logging.getLogger("llmdeck.gateway")


class StallLimit:
    """Mixed into uvicorn's protocol: a connection whose writes stay paused for ``_stall_s`` (its client
    reads nothing) is aborted."""

    _stall_s: float | None = None
    _stall_timer: asyncio.TimerHandle | None = None
    transport: Any = None

    def pause_writing(self) -> None:
        super().pause_writing()  # type: ignore[misc]
        if self._stall_s is not None and self._stall_timer is None:
            self._stall_timer = asyncio.get_running_loop().call_later(self._stall_s, self._stalled)

    def resume_writing(self) -> None:
        self._unstall()
        super().resume_writing()  # type: ignore[misc]

    def _unstall(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _stalled(self) -> None:
        """Aborted, not closed: a close waits to send what is buffered, which this client never reads."""
        self._stall_timer = None
        if self.transport is not None and not self.transport.is_closing():
            log.info("a client read nothing of its reply for %g s: its connection is closed", self._stall_s)
            self.transport.abort()


def head_timeout_protocol(
    base: type[asyncio.Protocol] | None = None,
    timeout_s: float = HEAD_TIMEOUT_S,
    stall_s: float | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``base``; default the one ``http="auto"`` picks) with a head timeout, and
    with ``stall_s``, a limit on how long a client may leave the reply unread."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol
    parent: Any = base

    class HeadTimeout(StallLimit, parent):  # type: ignore[misc]
        _head_timer: asyncio.TimerHandle | None = None
        _stall_s = stall_s

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._between_requests():
                self._arm()  # armed once: bytes that trickle in do not push it back
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._unstall()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is None or bool(cycle.response_complete)

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = asyncio.get_running_loop().call_later(timeout_s, self._late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _late(self) -> None:
            self._head_timer = None
            transport = getattr(self, "transport", None)
            if self._between_requests() and transport is not None and not transport.is_closing():
                transport.close()

    return HeadTimeout
