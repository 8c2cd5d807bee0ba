"""Client connections that never send a whole request head, or never read their reply, are closed
(uvicorn held them for ever)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from llmdeck.gateway.headtimeout import head_timeout_protocol
from llmdeck.util.net import free_port


async def _slow(request: Request) -> PlainTextResponse:
    await asyncio.sleep(float(request.query_params.get("s", "0")))
    return PlainTextResponse("ok")


ENDLESS = {"streams": 0, "ended": 0}


async def _endless(request: Request) -> StreamingResponse:
    """A reply that never ends (a stream the backend keeps sending), counted while it is relayed."""

    async def chunks() -> AsyncIterator[bytes]:
        ENDLESS["streams"] += 1
        try:
            while True:
                await asyncio.sleep(0)  # as a relay waits for the backend's next bytes
                yield b"x" * 65536
        finally:
            ENDLESS["ended"] += 1

    return StreamingResponse(chunks())


@contextlib.contextmanager
def _server(http: str = "auto", stall_s: float | None = None) -> Iterator[int]:
    """uvicorn with the gateway's protocol (a 0.5 s head timeout) on top of ``http``'s."""
    app = Starlette(routes=[Route("/", _slow), Route("/endless", _endless)])
    port = free_port()
    base = None
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    elif http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    protocol = head_timeout_protocol(base, timeout_s=0.5, stall_s=stall_s)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", http=protocol)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def _closed(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass  # a response (the request before): read on to the close
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_a_connection_that_never_finishes_a_head_is_closed(http: str) -> None:
    """uvicorn's keep-alive timer runs only after a response and a byte cancels it: these three had
    stayed open for as long as the peer did (for ever, for one that vanished without a FIN)."""
    pytest.importorskip(http)
    with _server(http) as port:
        silent = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nx-a")
        after = socket.create_connection(("127.0.0.1", port))  # a request served, then half a head
        after.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        time.sleep(0.3)
        after.sendall(b"GET / HTTP/1.1\r\nhos")
        socks = (silent, half, after)
        time.sleep(1.2)  # the 0.5 s went by for each
        assert [_closed(s, 0.3) for s in socks] == [True] * 3
        for s in socks:
            s.close()


def test_a_request_slower_than_the_head_timeout_is_not_cut() -> None:
    with _server() as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /?s=1.2 HTTP/1.1\r\nhost: x\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_a_client_that_never_reads_its_reply_is_let_go(http: str) -> None:
    """A client that stopped reading (a stopped process: its socket stays open, the kernel never times
    it out) had held its request, its reply's producer and two sockets for as long as it stayed: the
    soak's six held 6 requests at the gateway and 6 backend connections until they went away."""
    pytest.importorskip(http)
    ENDLESS.update(streams=0, ended=0)
    with _server(http, stall_s=0.5) as port, socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n")
        deadline = time.monotonic() + 5
        while ENDLESS["ended"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ENDLESS == {"streams": 1, "ended": 1}
        assert _closed(sock, 5)


def test_a_slow_reader_is_not_cut() -> None:
    """Paused writes that resume within the limit (a client reading slowly) keep the connection."""
    ENDLESS.update(streams=0, ended=0)
    with _server(stall_s=1.0) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n")
        sock.settimeout(2)
        got, until = 0, time.monotonic() + 2.5
        while time.monotonic() < until:
            got += len(sock.recv(65536))
            time.sleep(0.01)
        assert got > 1 << 20 and ENDLESS["ended"] == 0
