"""The lean transport's idle keep-alive pool (client/idlepool.py): capped per host and expiring, against a
TINY FAKE upstream that keeps every connection open as long as the client does and counts them; the
gateway's own pool too (the gateway runs for real under uvicorn)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from gateway_fakes import UvicornThread
from llmdeck.client.idlepool import EXPIRY_S, MOST
from llmdeck.client.transport import LeanTransport
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.settings import Settings

REPLY = json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode()


class FakeCountingUpstream:
    """Answers every request (after ``delay_s``: a burst's requests overlap) on a keep-alive connection
    it never closes itself; ``open`` counts the connections the client holds; ``stale`` > 0 closes a
    connection at its next request without an answer (a server's keep-alive timeout as the request
    comes) for that many connections that answered once."""

    def __init__(self, delay_s: float = 0.2, stale: int = 0) -> None:
        self.delay_s, self.stale = delay_s, stale
        self.open = self.accepted = 0
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                with self.lock:
                    self.open += 1
                    self.accepted += 1
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn, contextlib.suppress(OSError):
                self._answer(conn)
        finally:
            with self.lock:
                self.open -= 1

    def _answer(self, conn: socket.socket) -> None:
        answered, buf = 0, b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return  # the client closed it
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            sizes = [
                int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")
            ]
            while len(buf) < sum(sizes):
                buf += conn.recv(65536)
            buf = buf[sum(sizes) :]
            with self.lock:
                stale = answered > 0 and self.stale > 0
                self.stale -= stale
            if stale:
                return
            time.sleep(self.delay_s)
            out = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(REPLY)}\r\n\r\n"
            conn.sendall(out.encode() + REPLY)
            answered += 1

    def close(self) -> None:
        self.sock.close()


def _wait_for(check: object, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def test_a_burst_leaves_at_most_the_cap_idle_and_none_after_the_expiry() -> None:
    """Before: every connection a burst opened stayed in the pool for good (here 12, to a server that
    never closes them). Now at most ``most_idle`` stay after the burst, and none after the expiry, with
    no request after the burst to notice it."""
    up = FakeCountingUpstream()

    async def burst() -> tuple[int, int]:
        transport = LeanTransport(most_idle=4, idle_expiry_s=0.6)
        async with httpx.AsyncClient(transport=transport, timeout=10) as client:
            got = await asyncio.gather(*(client.post(f"{up.url}/v1/x", content=b"{}") for _ in range(12)))
            assert [r.status_code for r in got] == [200] * 12
            await asyncio.sleep(0.2)
            after_burst = up.open
            await asyncio.sleep(1.2)  # idle: past the expiry
            return after_burst, up.open

    try:
        after_burst, after_idle = asyncio.run(burst())
    finally:
        up.close()
    assert up.accepted == 12  # the burst did open 12
    assert after_burst == 4
    assert after_idle == 0


def test_a_second_stale_pooled_connection_is_not_tried() -> None:
    """A request whose pooled connection was closed as it was sent (nothing answered) is sent once more
    on a fresh connection: before, on the next pooled one, which a server that had closed both (their
    keep-alive timeouts end together after a burst) closed too, and the request failed (a 502 in the
    gateway, its backend marked down)."""
    up = FakeCountingUpstream(delay_s=0.1, stale=2)

    async def burst_then_one() -> int:
        async with httpx.AsyncClient(transport=LeanTransport(), timeout=10) as client:
            await asyncio.gather(*(client.post(f"{up.url}/v1/x", content=b"{}") for _ in range(2)))
            return (await client.post(f"{up.url}/v1/x", content=b"{}")).status_code

    try:
        status = asyncio.run(burst_then_one())
    finally:
        up.close()
    assert status == 200 and up.accepted == 3


@contextlib.contextmanager
def _gateway(backend: str, tmp_path: Path) -> Iterator[str]:
    text = (
        f"routes:\n  - model: a\n    backends: ['{backend}']\n"
        "health: {interval_s: 60, timeout_s: 2}\n"  # no health round during the test
    )
    settings = Settings(state_dir=tmp_path / "state")
    loaded = parse_config(text, source=tmp_path / "gateway.yaml", settings=settings)
    with UvicornThread(build_app(loaded)) as server:
        yield server.url


def test_the_gateway_holds_at_most_the_cap_to_a_backend_and_none_once_idle(tmp_path: Path) -> None:
    """The gateway's pool to its backend after a burst past the cap: MOST connections at most, none
    after EXPIRY_S idle (before: all of them, for the gateway's lifetime)."""
    up = FakeCountingUpstream(delay_s=0.3)
    n = MOST + 16
    body = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}

    async def burst(gw: str) -> list[int]:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            got = await asyncio.gather(
                *(client.post(f"{gw}/v1/chat/completions", json=body) for _ in range(n))
            )
            return [r.status_code for r in got]

    try:
        with _gateway(up.url, tmp_path) as gw:
            assert asyncio.run(burst(gw)) == [200] * n
            _wait_for(lambda: up.open <= MOST, 2.0)
            after_burst = up.open
            _wait_for(lambda: up.open == 0, EXPIRY_S + 2.0)
            after_idle = up.open
    finally:
        up.close()
    assert up.accepted > MOST  # the burst went past the cap
    assert after_burst <= MOST
    assert after_idle == 0
