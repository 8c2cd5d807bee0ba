"""A backend that refuses the connection (a server restarting: nothing listens at its port for a moment)
gets the request again shortly, not a 502 at once; a reset after the request was sent does not. The
gateway runs for real (uvicorn); the upstreams are tiny FAKES (tests/gateway_fakes.py), stopped and started
again on the same port."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_fakes import FakeOpenAIUpstream, UvicornThread, _raw_server
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.settings import Settings
from llmdeck.util.net import free_port

TIMEOUTS = (
    "timeouts: {connect_s: 3, first_byte_s: 5, response_s: 5, idle_s: 5}\n"
    "health: {interval_s: 60, timeout_s: 0.5}\n"  # no health round during a test
)
CHAT = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}


@contextlib.contextmanager
def gateway(backends: list[str], tmp_path: Path) -> Iterator[str]:
    text = "routes:\n  - model: a\n    backends: [" + ", ".join(f"'{b}'" for b in backends) + "]\n" + TIMEOUTS
    settings = Settings(state_dir=tmp_path / "state")
    loaded = parse_config(text, source=tmp_path / "gateway.yaml", settings=settings)
    with UvicornThread(build_app(loaded)) as server:
        yield server.url


def _post_in_thread(url: str, body: dict[str, object]) -> tuple[threading.Thread, list[httpx.Response]]:
    got: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: got.append(httpx.post(url, json=body, timeout=30)), daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_while_its_backend_restarts_waits_for_it(tmp_path: Path, stream: bool) -> None:
    """Before: a request in the second its backend was away (stopped, its port not yet listening again)
    got a 502 "cannot connect" at once and the backend was marked down. Now it is sent again till the
    server listens (the connect timeout at most), and served; the backend stays up."""
    port = free_port()
    upstream = FakeOpenAIUpstream()
    first = UvicornThread(upstream.app, port=port).__enter__()  # up at the gateway's first probe
    with gateway([f"http://127.0.0.1:{port}"], tmp_path) as gw:
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        first.__exit__(None, None, None)  # stopped
        thread, got = _post_in_thread(f"{gw}/v1/chat/completions", {**CHAT, "stream": stream})
        time.sleep(1.0)  # the request meets the stopped server
        with UvicornThread(upstream.app, port=port):
            thread.join(15)
            assert got and got[0].status_code == 200, got and got[0].text
            assert (b"second" if stream else b'"hi"') in got[0].content
            backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
            assert backend["healthy"] is True and backend["failures"] == 0, backend
    assert len(upstream.bodies) == 2


def test_a_backend_that_stays_away_gets_the_same_502_after_the_connect_timeout(tmp_path: Path) -> None:
    """Tried again for the connect timeout (3 s here) from the backend's first refusal, for a request that
    came later too; then the 502 as before; marked down, so the next request gets the all-down 503 at
    once."""
    port = free_port()
    first = UvicornThread(FakeOpenAIUpstream().app, port=port).__enter__()
    with gateway([f"http://127.0.0.1:{port}"], tmp_path) as gw:
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        first.__exit__(None, None, None)
        t0 = time.monotonic()
        thread, later = _post_in_thread(f"{gw}/v1/chat/completions", CHAT)
        time.sleep(1.5)
        r = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)  # it gives up with the first
        assert r.status_code == 502 and 2.5 < time.monotonic() - t0 < 4, (r.text, time.monotonic() - t0)
        thread.join(5)
        assert later and later[0].status_code == 502
        error = r.json()["error"]
        assert error["code"] == "upstream_unavailable" and error["message"].count("cannot connect") == 1
        backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
        # one a request, not one a try (~24 tries); the probe each second after a give-up (Router.soon) may
        # have found it away once more by now
        assert backend["healthy"] is False and 2 <= backend["failures"] <= 3, backend
        t0 = time.monotonic()
        r = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)
        assert r.status_code == 503 and r.json()["error"]["code"] == "backend_down"
        assert time.monotonic() - t0 < 1.5


def test_a_replica_serves_and_the_restarted_one_is_back_before_the_next_health_round(
    tmp_path: Path,
) -> None:
    """A replica that refused the connection: the request goes to the other one at once (as before), and
    the refused one is probed each second till it answers. Before: it stayed out of rotation till the
    next health round (60 s here)."""
    port = free_port()
    upstream, other = FakeOpenAIUpstream(), FakeOpenAIUpstream()
    first = UvicornThread(upstream.app, port=port).__enter__()  # up at the gateway's first probe
    with UvicornThread(other.app) as live, gateway([f"http://127.0.0.1:{port}", live.url], tmp_path) as gw:
        first.__exit__(None, None, None)  # then stopped
        for _ in range(2):  # one of them meets the stopped one first
            t0 = time.monotonic()
            assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
            assert time.monotonic() - t0 < 1.0
        backends = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"]
        assert backends[0]["healthy"] is False and backends[0]["failures"] == 1
        with UvicornThread(upstream.app, port=port):
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not backends[0]["healthy"]:
                time.sleep(0.2)
                backends = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"]
            assert backends[0]["healthy"] is True, backends


def test_a_reset_after_the_request_was_sent_is_not_sent_again(tmp_path: Path) -> None:
    """A connection that took the request and closed without an answer may have run it: a 502 at once,
    the request sent once (only a refused connection, where nothing was sent, is tried again)."""
    got: list[bytes] = []

    def handler(conn: socket.socket) -> None:
        request = conn.recv(65536)
        if request.startswith(b"GET /v1/models"):
            body = b'{"data": [{"id": "fake-served"}]}'
            head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
            conn.sendall(head.encode() + body)
        else:
            got.append(request)
        conn.close()

    with _raw_server(handler) as url, gateway([url], tmp_path) as gw:
        t0 = time.monotonic()
        r = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)
        assert r.status_code == 502 and time.monotonic() - t0 < 1.5, r.text
        assert "the connection broke" in r.json()["error"]["message"]
    assert len(got) == 1
