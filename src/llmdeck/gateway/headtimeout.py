"""Client connections that never finish a request's head are closed; uvicorn kept them for ever.

uvicorn's keep-alive timeout runs only once a response is complete, and the first byte of the next
request cancels it: a connection that sends nothing, or part of a head, held its socket (a file
descriptor) and its protocol object until the peer closed it. A client that vanished without a FIN
(a laptop put to sleep, a NAT that forgot the flow) or one that opens connections and sends nothing
left them piling up over an uptime (measured: 200 such connections, every one still open 70 s later).
Now a connection that is between requests (just opened, or its last response sent and a byte of the
next head come) has :data:`HEAD_TIMEOUT_S` to complete a head; a request being served is never cut
(its body has ``read_body``'s timeouts, its reply the relay's).
"""

from __future__ import annotations

import asyncio
from typing import Any

HEAD_TIMEOUT_S = 30.0  # as uvicorn's keep-alive (serve.py): a head takes a client milliseconds


def head_timeout_protocol(
    base: type[asyncio.Protocol] | None = None, timeout_s: float = HEAD_TIMEOUT_S
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``base``; default the one ``http="auto"`` picks) with a head timeout."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol
    parent: Any = base

    class HeadTimeout(parent):  # type: ignore[misc]
        _head_timer: asyncio.TimerHandle | None = None

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
