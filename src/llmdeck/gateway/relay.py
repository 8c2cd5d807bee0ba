"""Relaying a backend's reply to the client chunk by chunk, bounded, and ending it cleanly when it breaks.

* An event stream (SSE) may run as long as it keeps talking: the idle timeout (the httpx read timeout)
  bounds each silence. One the backend breaks ends with an error event in the stream's API's shape
  (a Responses stream: then ``response.failed``, surfaces.stream_error_event).
* Any other reply (JSON, audio, an event stream the client did not ask for) is one answer: it must
  arrive whole within the response timeout (``whole_s``), so a backend that trickles it byte by byte
  cannot hold the request forever. One that breaks or runs out of time drops the client's connection
  (a plain body has no way to say "broken"), with one line in the log, not a traceback.
* An event stream is relayed in whole events: one the backend breaks mid-event ends with the error
  event, not the error glued to half an event.
* A client that disconnects cancels the relay, which closes the upstream connection: vLLM sees the
  disconnect and aborts the request (``RelayResponse`` watches for ``http.disconnect`` itself).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
import httpx
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from llmdeck.errors import InternalError
from llmdeck.gateway.metrics import UsageSniffer
from llmdeck.gateway.routing import BackendState
from llmdeck.gateway.surfaces import IdSniffer, ResponsesTrail, stream_error_event

if TYPE_CHECKING:
    from llmdeck.gateway.proxy import RequestCtx

DROP_RESPONSE = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "date",
        "server",
    }
)
# why a reply stopped (a metrics label), in words for the stream's error event
_BROKE = {
    "idle_timeout": "it sent nothing for longer than the gateway's idle timeout (timeouts.idle_s)",
    "response_timeout": "its whole answer took longer than the gateway's response timeout "
    "(timeouts.response_s)",
    "stream_broken": "the connection to it broke",
}


class BodyBroken(InternalError):
    """A plain body the backend broke off: the client's connection is dropped, not the reply ended."""


MAX_HELD = 1 << 20  # a part of an event held back: a backend that never ends one is relayed as it comes


def event_end(data: bytes) -> int:
    """Where the last whole server-sent event in ``data`` ends (0: none yet); events end in a blank
    line, written with LF, CRLF or CR."""
    if data.endswith(b"\n\n"):  # the usual chunk: whole events (one test, not three searches)
        return len(data)
    ends = (data.rfind(b"\n\n") + 2, data.rfind(b"\r\n\r\n") + 4, data.rfind(b"\r\r") + 2)
    return max((end for end, sep in zip(ends, (2, 4, 2), strict=True) if end >= sep), default=0)


class Relay:
    """The backend's body, relayed chunk by chunk; ``close`` (idempotent) releases everything.

    ``whole_s``: a reply that is no stream the client asked for (``streamed``) must be complete within
    this many seconds of ``opened``."""

    def __init__(
        self,
        resp: httpx.Response,
        state: BackendState,
        ctx: RequestCtx,
        whole_s: float | None = None,
        opened: float | None = None,
        streamed: bool = True,
    ) -> None:
        self.resp, self.state, self.ctx = resp, state, ctx
        self.sse = resp.headers.get("content-type", "").startswith("text/event-stream")
        self.sniffer = UsageSniffer(self.sse)
        self.ids = IdSniffer() if ctx.ids is not None and resp.status_code == 200 else None
        self.trail = ResponsesTrail() if self.sse and ctx.api == "responses" else None
        start = time.monotonic() if opened is None else opened
        # a stream asked for runs as long as it flows; any other reply (an event stream to a request that
        # asked for none, a backend pinging forever) is whole within whole_s
        self.deadline = None if (self.sse and streamed) or whole_s is None else start + whole_s
        self.outcome = ""
        self.client_gone = False
        self._closed = False

    async def hang_up(self) -> None:
        """The client went away: the backend's connection is closed now, so a relay waiting for its next
        bytes ends at once (a cancel alone had not reached it while a flood of bytes kept it busy)."""
        self.client_gone = True
        await self.resp.aclose()

    def headers(self) -> dict[str, str]:
        """The backend's headers to pass on; a 204/304's Content-Length (of a body it never has) is not,
        or the server would wait for those bytes and break the client's connection."""
        drop = DROP_RESPONSE | ({"content-length"} if self.resp.status_code in (204, 304) else set())
        return {k: v for k, v in self.resp.headers.items() if k.lower() not in drop}

    async def _next(self, chunks: AsyncIterator[bytes]) -> bytes:
        if self.deadline is None:  # a stream: no whole-reply deadline (its idle timeout is the transport's);
            return await anext(chunks)  # a timeout context per chunk was ~6% of the relay's CPU
        async with asyncio.timeout(max(0.0, self.deadline - time.monotonic())):
            return await anext(chunks)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The reply as it comes; an event stream in whole events (a part of one is held until its end,
        so a stream the backend breaks mid-event ends with the error event, not glued to half an event)."""
        first = True
        raw = self.resp.aiter_raw()
        held = b""
        try:
            while True:
                try:
                    chunk = await self._next(raw)
                except StopAsyncIteration:
                    if held:
                        yield held  # a last event without its blank line: the backend's to end
                    return
                if first:
                    self.ctx.ttft()
                    first = False
                self.sniffer.feed(chunk)
                if self.ids is not None:
                    self.ids.feed(chunk)
                if self.sse:
                    held += chunk
                    cut = len(held) if len(held) > MAX_HELD else event_end(held)  # no event is that long
                    chunk, held = held[:cut], held[cut:]
                if chunk:
                    if self.trail is not None:
                        self.trail.feed(chunk)
                    yield chunk
        except (httpx.HTTPError, TimeoutError) as exc:  # the backend died, went silent, or ran out of time
            if self.client_gone:
                return  # we hung up on the backend (``hang_up``): nothing broke there
            if isinstance(exc, TimeoutError):
                reason = "response_timeout"
            else:
                reason = "idle_timeout" if isinstance(exc, httpx.TimeoutException) else "stream_broken"
            self.outcome = "upstream_broke"
            self.state.mark_down(f"mid-reply: {_BROKE[reason]}")  # the 503's and the status's words
            self.ctx.metrics.errors.labels(self.ctx.route, self.state.backend.label, reason).inc()
            if not self.sse:  # no way to mark a plain body as broken: the connection is dropped
                raise BodyBroken(_BROKE[reason]) from None
            message = f"The backend stopped mid-stream: {_BROKE[reason]}."
            yield stream_error_event(self.ctx.api, message, self.trail)

    async def close(self, outcome: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        await self.resp.aclose()
        self.state.outstanding -= 1
        if self.ids is not None and self.ids.rid and self.ctx.ids is not None:
            self.ctx.ids.remember(self.ids.rid, self.ctx.route, self.state.url)
        outcome = outcome or self.outcome
        if outcome == "client_disconnected" and self.sniffer.completed:
            outcome = ""  # the client had the whole reply (Codex hangs up at response.completed)
        status = {"client_disconnected": 499, "upstream_broke": 502}.get(outcome, self.resp.status_code)
        self.ctx.finish(status, outcome, self.sniffer.finish())


class RelayResponse(StreamingResponse):
    """A streaming response that always listens for the client's disconnect and cancels the relay.

    (Starlette's StreamingResponse only notices a disconnect on its next send for ASGI spec >= 2.4;
    a backend still thinking would keep generating for a client that is gone.) A plain body the
    backend broke leaves the response incomplete: the server closes the client's connection.
    """

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        super().__init__(relay.chunks(), status_code=relay.resp.status_code, headers=relay.headers())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        outcome = ""
        done = False
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    nonlocal done, outcome
                    try:
                        await self.stream_response(send)
                    except OSError:
                        outcome = "client_disconnected"  # the client went away while we wrote
                    except BodyBroken:
                        outcome = "upstream_broke"  # the response stays incomplete: its connection closes
                    done = True
                    group.cancel_scope.cancel()

                async def watch() -> None:
                    nonlocal outcome
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    if not done:
                        outcome = "client_disconnected"
                        await self.relay.hang_up()
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                group.start_soon(watch)
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
                await self.relay.close(outcome)
