"""Tiny FAKE upstreams for the gateway's proxy tests (not engines: the real one is in the integration tests).

* ``FakeOpenAIUpstream``: /v1/models and chat/completions; records each body it got; streams SSE
  chunks, holding after the first until the test releases it (proves chunk-by-chunk relaying), or
  streams forever until the client goes away (proves a disconnect reaches the upstream; it streams
  so to a request that asked for no stream too).
* ``fake_silent_server``: accepts TCP connections and never answers (or answers only the health probe).
* ``fake_html_server``: answers its health probe, and every request with a 200 HTML page.
* ``fake_dying_stream_server``: answers a stream with two SSE events (and half a third), then drops
  the connection.
* ``fake_reset_stream_server``: a stream that ends at the close, cut by a reset after two events.
* ``fake_models_reply``: its /v1/models answers a given body (a wrong shape: no models list).
* ``fake_trickle_server``: a plain JSON body, one byte every 0.2 s (never whole in time).
* ``fake_raw_reply``: answers every request with given bytes (an odd response head), then holds on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from llmdeck.util.net import free_port


class UvicornThread:
    """An ASGI app served by uvicorn on 127.0.0.1 in a daemon thread."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> UvicornThread:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _chunk(text: str, i: int) -> bytes:
    body = {
        "id": f"fake-{i}",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class FakeOpenAIUpstream:
    """A FAKE OpenAI-compatible upstream (not an engine) with switches the tests turn."""

    def __init__(self, served: str = "fake-served", mode: str = "normal") -> None:
        self.served = served
        self.mode = mode  # "normal" | "hold" (first chunk, then wait for release) | "forever"
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.release = threading.Event()
        self.finished = threading.Event()
        self.outcome = ""
        self.delay_s = 0.0  # a whole (non-streamed) answer comes after this long, nothing before it
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._chat, methods=["POST"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.served, "max_model_len": 1024}]})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        if body.get("stream") is not True and self.mode != "forever":  # "forever" streams to any request
            await asyncio.sleep(self.delay_s)
            usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
            return JSONResponse(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "usage": usage,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
                }
            )
        return StreamingResponse(self._events(request), media_type="text/event-stream")

    async def _events(self, request: Request) -> AsyncIterator[bytes]:
        try:
            yield _chunk("first", 0)
            if self.mode == "hold":
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
            if self.mode == "flood":  # as fast as it can: the socket buffers fill up
                t0 = time.monotonic()
                while time.monotonic() - t0 < 30:  # 16 KB events: fewer turns of a loop that holds the GIL
                    yield _chunk("x" * 16384, 2)
                    await asyncio.sleep(0)
                self.outcome = "ran_out"
                return
            if self.mode == "forever":
                for _ in range(600):
                    await asyncio.sleep(0.05)
                    if await request.is_disconnected():
                        self.outcome = "client_gone"
                        return
                    yield b": ping\n\n"
                self.outcome = "ran_out"
                return
            yield _chunk("second", 1)
            usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
            yield b"data: " + json.dumps({"id": "u", "choices": [], "usage": usage}).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
            self.outcome = "done"
        except (asyncio.CancelledError, OSError, GeneratorExit):
            self.outcome = "client_gone"
            raise
        finally:
            self.finished.set()


@contextlib.contextmanager
def _raw_server(handler: Any) -> Iterator[str]:
    """A socket server on a free port; ``handler(conn)`` runs per connection in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            conns.append(conn)
            threading.Thread(target=handler, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()
        sock.close()


def _send_200(conn: socket.socket, ctype: str, body: bytes) -> None:
    """A whole 200 reply of ``ctype``, then the connection closed."""
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n"
    head += "connection: close\r\n\r\n"
    conn.sendall(head.encode() + body)
    conn.close()


def _answer_probe(conn: socket.socket, request: bytes) -> bool:
    """The health probe (GET /v1/models) gets a healthy answer; True when ``request`` was it."""
    if not request.startswith(b"GET /v1/models"):
        return False
    _send_200(conn, "application/json", json.dumps({"data": [{"id": "fake-served"}]}).encode())
    return True


def fake_silent_server(*, answer_probe: bool = False) -> contextlib.AbstractContextManager[str]:
    """Accepts connections, reads, never answers (a hung backend); ``answer_probe``: but its health
    probe answers (a server that hangs on requests only)."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            request = conn.recv(65536)
            if answer_probe and _answer_probe(conn, request):
                return
            time.sleep(60)

    return _raw_server(handler)


HTML_PAGE = b"<!DOCTYPE html><html><body><h1>Please log in to use this network</h1></body></html>"


def fake_html_server() -> contextlib.AbstractContextManager[str]:
    """Its health probe answers JSON; every other request gets a 200 HTML page (a captive portal)."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if _answer_probe(conn, conn.recv(65536)):
                return
            _send_200(conn, "text/html; charset=utf-8", HTML_PAGE)

    return _raw_server(handler)


def fake_dying_stream_server(tail: bytes = b"") -> contextlib.AbstractContextManager[str]:
    """Starts a chunked SSE reply with two events (and ``tail``: half an event), then closes the socket
    mid-stream (a crashed backend)."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if _answer_probe(conn, conn.recv(65536)):  # the health probe: a healthy answer
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            for data in [_chunk("part0", 0), _chunk("part1", 1), *([tail] if tail else [])]:
                conn.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                time.sleep(0.05)
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    return _raw_server(handler)


def fake_cut_stream_server(head: bytes) -> contextlib.AbstractContextManager[str]:
    """Answers a stream with ``head`` (a real backend's first events), then closes the socket before the
    chunked body's end: a backend that crashed mid-stream."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if _answer_probe(conn, conn.recv(65536)):
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            conn.sendall(f"{len(head):x}\r\n".encode() + head + b"\r\n")
            time.sleep(0.05)
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    return _raw_server(handler)


def fake_reset_stream_server() -> contextlib.AbstractContextManager[str]:
    """Answers a stream with a body that ends at the close (no length, not chunked) and two SSE events,
    then resets the connection (RST, not FIN): a backend that crashed, not one that finished."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if _answer_probe(conn, conn.recv(65536)):
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            conn.sendall(_chunk("part0", 0) + _chunk("part1", 1))
            time.sleep(0.1)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    return _raw_server(handler)


def fake_models_reply(body: bytes) -> contextlib.AbstractContextManager[str]:
    """Every request (the health probe, /v1/models) gets a 200 JSON ``body``."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.recv(65536)
            _send_200(conn, "application/json", body)

    return _raw_server(handler)


def fake_trickle_server() -> contextlib.AbstractContextManager[str]:
    """Its health probe answers; a request gets the headers of a 1000-byte JSON body at once, then the
    body one byte every 0.2 s (a backend too slow to ever finish, never silent long enough to time out)."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if _answer_probe(conn, conn.recv(65536)):
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
            )
            for _ in range(999):
                time.sleep(0.2)
                conn.sendall(b" ")

    return _raw_server(handler)


def fake_raw_reply(reply: bytes) -> contextlib.AbstractContextManager[str]:
    """Its health probe answers; every other request gets the bytes ``reply`` as they are (an odd head:
    a 204, a status of 999, a NUL in a header, a bad Content-Length, thousands of 100 Continue), and the
    connection is kept open for 30 s (a body that was never promised never comes)."""

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if _answer_probe(conn, conn.recv(65536)):
                return
            conn.sendall(reply)
            time.sleep(30)

    return _raw_server(handler)
