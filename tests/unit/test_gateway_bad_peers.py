"""The gateway against peers that misbehave (tiny FAKES, tests/gateway_fakes.py): backends whose models
list has the wrong shape, that break or trickle a reply, report absurd usage; clients that send huge
bodies, stop mid-body or hang up. Every case: an answer in the API's shape within seconds, in words (no
exception class names), no traceback in the gateway's log, and the gateway keeps serving."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_fakes import (
    FakeOpenAIUpstream,
    UvicornThread,
    fake_dying_stream_server,
    fake_models_reply,
    fake_raw_reply,
    fake_reset_stream_server,
    fake_trickle_server,
)
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.metrics import token_counts
from llmdeck.settings import Settings

FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 1, response_s: 1, idle_s: 2}\n"
    "health: {interval_s: 60, timeout_s: 0.5}\n"
)
CHAT = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}


@contextlib.contextmanager
def gateway(backend: str, tmp_path: Path, timeouts: str = FAST) -> Iterator[str]:
    text = f"routes:\n  - model: a\n    backends: ['{backend}']\n" + timeouts
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = parse_config(text, source=path, settings=Settings(state_dir=tmp_path / "state"))
    with UvicornThread(build_app(loaded)) as server:
        yield server.url


@contextlib.contextmanager
def fake() -> Iterator[str]:
    upstream = FakeOpenAIUpstream()
    with UvicornThread(upstream.app) as server:
        yield server.url


def test_a_compressed_models_list_is_a_down_backend_not_inflated(tmp_path: Path) -> None:
    """gzip inside gzip: the health probe had inflated it whole, on the event loop (7 KB: 8 GB, 12 s)."""
    from fake_servers import running

    slow_ok = FAST.replace("timeout_s: 0.5", "timeout_s: 10")  # a loaded machine: the probe reads it
    with running("fake_gzip_bomb_server") as bomb, gateway(bomb, tmp_path, slow_ok) as gw:
        backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
    assert backend["healthy"] is False and "compressed" in backend["last_error"]


@pytest.mark.parametrize("body", [b'{"data": {"x": 1}}', b'{"data": 5}', b'{"data": "abc"}'])
def test_a_models_list_of_the_wrong_shape_is_a_down_backend_not_a_dead_gateway(
    tmp_path: Path, body: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    """{"data": {...}} made the first probe raise KeyError/TypeError: the gateway did not start."""
    with fake_models_reply(body) as odd, gateway(odd, tmp_path) as gw:
        backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
        assert backend["healthy"] is False and "models list" in backend["last_error"]
        r = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)
        assert r.status_code == 503 and "models list" in r.json()["error"]["message"]
    assert "Traceback" not in capfd.readouterr().err


def test_a_served_name_that_is_no_string_is_not_sent_as_the_model(tmp_path: Path) -> None:
    reply = b'{"data": [{"id": {"a": 1}, "max_model_len": -3}]}'
    with fake_models_reply(reply) as odd, gateway(odd, tmp_path) as gw:
        backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
        assert backend["healthy"] is True and backend["served_model"] is None
        assert "max_model_len" not in httpx.get(f"{gw}/v1/models").json()["data"][0]


def test_a_broken_stream_is_told_in_words(tmp_path: Path) -> None:
    with fake_dying_stream_server() as dying, gateway(dying, tmp_path) as gw:
        r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=10)
        last = json.loads(r.content.strip().split(b"\n\n")[-1][len(b"data: ") :])
        message = last["error"]["message"]
        assert "connection to it broke" in message and "Error" not in message  # no RemoteProtocolError
        backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]  # down, in words
        assert backend["healthy"] is False and "connection to it broke" in backend["last_error"]


def test_a_stream_cut_by_a_reset_is_no_whole_reply(tmp_path: Path) -> None:
    """A body that ends at the close, then a reset (RST): it had been relayed as a whole reply (no
    error event, the backend counted healthy)."""
    with fake_reset_stream_server() as cut, gateway(cut, tmp_path) as gw:
        r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=10)
        events = [e for e in r.content.split(b"\n\n") if e.strip()]
        assert len(events) == 3 and "connection to it broke" in json.loads(events[2][6:])["error"]["message"]
        backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
        assert backend["healthy"] is False


def test_a_backend_whose_stream_just_broke_is_probed_again_not_refused(tmp_path: Path) -> None:
    """A reply that broke marks its backend down. The next request within a second of that reply's start
    had been refused (503 backend_down, no probe, Retry-After of the health interval): the reply's start
    counted as a check newer than the break (the SDK sweep's responses stream after a messages stream
    cut, evidence/gateway/results/sdk_sweep.txt). Now the backend is probed, found up, and tried."""
    with fake_reset_stream_server() as cut, gateway(cut, tmp_path) as gw:
        for _ in range(2):
            r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=10)
            assert r.status_code == 200 and "connection to it broke" in r.text, r.text


@pytest.mark.parametrize(
    ("path", "shape"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")]
)
def test_a_backends_redirect_is_a_502_in_words_not_relayed(tmp_path: Path, path: str, shape: str) -> None:
    """A 307 to another host had been relayed as it came (an empty body, the Location to follow past the
    gateway), and counted as a reply."""
    away = (
        b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://10.9.9.9:8000/v1/x\r\ncontent-length: 0\r\n\r\n"
    )
    with fake_raw_reply(away) as odd, gateway(odd, tmp_path) as gw:
        r = httpx.post(f"{gw}{path}", json={**CHAT, "max_tokens": 4}, timeout=10)
        assert r.status_code == 502 and "location" not in r.headers
        assert r.headers["x-should-retry"] == "false"  # the backend's config: a retry meets it again
        error = r.json()["error"]
        assert "redirect to 'http://10.9.9.9:8000/v1/x'" in error["message"]
        assert (
            (error["type"] == "api_error") if shape == "anthropic" else (error["code"] == "upstream_redirect")
        )
        assert httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]["healthy"] is True


def test_a_stream_broken_mid_event_ends_with_whole_events_then_the_error(tmp_path: Path) -> None:
    """Half an event, then the backend died: the error event had been glued onto the half
    (``data: {"id": "b", "choidata: {"error": ...}``), one event of invalid JSON to the client."""
    with fake_dying_stream_server(tail=b'data: {"id": "b", "choi') as dying, gateway(dying, tmp_path) as gw:
        r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=10)
    events = [e for e in r.content.split(b"\n\n") if e.strip()]
    assert [json.loads(e[len(b"data: ") :]).get("id") for e in events[:2]] == ["fake-0", "fake-1"]
    assert len(events) == 3 and "connection to it broke" in json.loads(events[2][6:])["error"]["message"]


def test_a_trickled_plain_body_is_cut_at_the_response_timeout(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A non-streamed reply must be whole within timeouts.response_s (1 s here): it took 200 s, one
    byte every 0.2 s, never silent for the idle timeout. Cut: the connection drops, no traceback."""
    with fake_trickle_server() as slow, gateway(slow, tmp_path) as gw:
        t0 = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)
        assert time.monotonic() - t0 < 15  # response_s 1; the trickle runs 200 s; slack for loaded CI
        assert httpx.get(f"{gw}/health").status_code == 200
        assert 'reason="response_timeout"' in httpx.get(f"{gw}/metrics").text
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in ASGI application" not in err


def test_usage_past_a_float_is_not_counted() -> None:
    """A backend's usage of 10**400 tokens raised OverflowError in the counter (a traceback per reply)."""
    usage = {"prompt_tokens": 10**400, "completion_tokens": 2**53 + 1, "input_tokens": 7}
    assert token_counts(usage) == {"prompt": 7}


def _raw_post(url: str, head: str, body: bytes = b"", path: str = "/v1/chat/completions") -> socket.socket:
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    start = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    sock.sendall(f"{start}{head}\r\n\r\n".encode() + body)
    return sock


def _reply(sock: socket.socket) -> bytes:
    """The whole reply to a refused request (headers and body may come in two reads)."""
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def test_request_bodies_are_bounded_in_size_and_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with fake() as up, gateway(up, tmp_path) as gw:
        # a Content-Length over 32 MiB: refused before a byte of it is read (it was read whole first)
        with _raw_post(gw, "content-length: 999999999999") as sock:
            head = _reply(sock)
        assert head.startswith(b"HTTP/1.1 413") and b"over 32 MiB" in head
        # the dashboard's actions take a small JSON object: 64 KiB at most
        with _raw_post(gw, "content-length: 999999", path="/ui/api/models/m/start") as sock:
            head = _reply(sock)
        assert head.startswith(b"HTTP/1.1 413") and b"over 64 KiB" in head

        def chunked() -> Iterator[bytes]:  # no Content-Length: refused as it passes 32 MiB
            yield b'{"model": "a", "x": "'
            for _ in range(40):
                yield b"x" * (1 << 20)

        r = httpx.post(f"{gw}/v1/chat/completions", content=chunked(), timeout=20)
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
        # a client that stops mid-body: a 408 after the idle timeout (2 s), not a wait forever
        t0 = time.monotonic()
        with _raw_post(gw, "content-length: 100", b'{"mo') as sock:
            head = _reply(sock)
        assert head.startswith(b"HTTP/1.1 408") and b"stopped arriving" in head
        assert time.monotonic() - t0 < 9  # idle_s 2, under the socket's 10 s
        # a client that hangs up mid-body: no traceback (it was starlette's ClientDisconnect)
        _raw_post(gw, "content-length: 100", b'{"mo').close()
        time.sleep(0.5)
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ClientDisconnect" not in err


@pytest.mark.parametrize(
    ("body", "words"),
    [(b"[1, 2]", "did not answer a JSON object"), (b"{nope", "did not answer a JSON object")],
)
def test_gateway_status_when_its_status_is_not_an_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes, words: str
) -> None:
    """A list made `dict.update` raise (an internal error); any failure was named by its class."""
    import os

    from llmdeck.gateway import service

    settings = Settings(state_dir=tmp_path / "state")
    monkeypatch.setattr(service, "_ours", lambda record: True)
    with fake_models_reply(body) as odd:
        port = int(odd.rsplit(":", 1)[1])
        record = service.GatewayRecord(
            pid=os.getpid(), host="127.0.0.1", port=port, config=tmp_path / "g.yaml", log_path=tmp_path / "l"
        )
        service.record_path(settings).parent.mkdir(parents=True)
        service.record_path(settings).write_text(record.model_dump_json())
        data = service.status(settings)
    assert data["state"] == "unhealthy" and data["error"] == f"/gateway/status {words}"


@contextlib.contextmanager
def fake_endless_status_server() -> Iterator[str]:
    """Answers every request with a 200 JSON body that does not end: 64 MiB as fast as it goes (more
    than any cap), then nothing (15 s)."""
    from gateway_fakes import _raw_server

    def handler(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{")
            for _ in range(1024):
                conn.sendall(b" " * 65536)
            time.sleep(15)

    with _raw_server(handler) as url:
        yield url


@pytest.mark.parametrize(
    ("server", "words"),
    [
        (fake_endless_status_server, "its /gateway/status answer was over the size cap"),
        (fake_trickle_server, "no answer to /gateway/status within 3 s"),
    ],
    ids=["endless", "trickle"],
)
def test_gateway_status_is_bounded_and_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: Any, words: str
) -> None:
    """`gateway status` read /gateway/status with httpx.get: an endless body was read whole (GBs, for as
    long as it came), a trickled one for ever. Now capped (JSON_CAP) and bounded as a whole (3 s)."""
    import os

    from llmdeck.gateway import service

    settings = Settings(state_dir=tmp_path / "state")
    monkeypatch.setattr(service, "_ours", lambda record: True)
    with server() as odd:
        port = int(odd.rsplit(":", 1)[1])
        record = service.GatewayRecord(
            pid=os.getpid(), host="127.0.0.1", port=port, config=tmp_path / "g.yaml", log_path=tmp_path / "l"
        )
        service.record_path(settings).parent.mkdir(parents=True)
        service.record_path(settings).write_text(record.model_dump_json())
        t0 = time.monotonic()
        data = service.status(settings)
    assert time.monotonic() - t0 < 8
    assert data["state"] == "unhealthy" and data["error"] == words


def test_an_unknown_model_name_is_not_echoed_whole(tmp_path: Path) -> None:
    with fake() as up, gateway(up, tmp_path) as gw:
        r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "model": "x" * 200_000}, timeout=10)
    assert r.status_code == 404 and len(r.content) < 2_000 and "…" in r.json()["error"]["message"]


def _healthy(gw: str) -> bool:
    return bool(httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]["healthy"])


@pytest.mark.parametrize(
    ("method", "reply"),
    [
        ("POST", b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n"),
        ("POST", b"HTTP/1.1 304 Not Modified\r\ncontent-length: 50\r\nconnection: close\r\n\r\n"),
        (
            "HEAD",
            b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\nconnection: close\r\n\r\n",
        ),
    ],
    ids=["204", "304", "HEAD"],
)
def test_a_reply_without_a_body_is_not_waited_on(tmp_path: Path, method: str, reply: bytes) -> None:
    """A 204/304 or the answer to a HEAD has no body: read as one, the reply had hung for the idle timeout,
    then the backend was marked down ("it sent nothing") and the client's connection broken."""
    with fake_raw_reply(reply) as odd, gateway(odd, tmp_path) as gw, httpx.Client(timeout=10) as client:
        for _ in range(2):  # the second on the same keep-alive connection: it had been reset
            r = client.request(method, f"{gw}/v1/chat/completions", content=json.dumps(CHAT))
            assert r.status_code == int(reply.split()[1]) and r.content == b""
        assert _healthy(gw)
        assert "upstream_broke" not in httpx.get(f"{gw}/metrics").text


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 999 Odd\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 0 Zero\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 100000000000000000000 Big\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx-odd: a\x00b\r\ncontent-length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-length: abc\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n{}",
        b"HTTP/1.1 100 Continue\r\n\r\n" * 3000 + b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
    ],
    ids=[
        "status-999",
        "status-0",
        "status-huge",
        "nul-in-header",
        "length-abc",
        "length-negative",
        "3000-continues",
    ],
)
def test_a_reply_head_no_http_server_sends_is_a_502_in_words(
    tmp_path: Path, reply: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    """Relayed, these had crashed the reply (status 999 or a NUL header: the client's connection dropped;
    3000 interim heads: RecursionError, a 500; Content-Length abc: ValueError, a 500)."""
    # the fake answers at once: time limits well above a loaded machine's delays (a 1 s limit had run
    # out under the full suite, a 504 in place of the 502 asked about)
    slow_ok = FAST.replace("response_s: 1,", "response_s: 8,").replace("first_byte_s: 1,", "first_byte_s: 8,")
    with fake_raw_reply(reply) as odd, gateway(odd, tmp_path, slow_ok) as gw:
        r = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=20)
        assert r.status_code == 502 and "No backend of model 'a' answered" in r.json()["error"]["message"]
        assert httpx.get(f"{gw}/health").status_code == 200
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in ASGI application" not in err


def test_sleep_wake_and_start_failures_are_said_in_words_not_python_classes() -> None:
    """Models on demand: a refused /sleep had read "(HTTPStatusError: Client error '404 Not Found' for
    url ... For more information check: https://developer.mozilla.org/...)", a post-wake probe answered
    with garbage "(UnicodeDecodeError: ...)", a start that raised "RuntimeError: ..." (the 503's words)."""
    from fake_servers import running
    from llmdeck.errors import OperationError
    from llmdeck.gateway import lifecycle

    with running("fake_404_server") as url, pytest.raises(OperationError) as info:
        lifecycle.sleep(url, 1)
    assert info.value.message == f"vLLM at {url} refused POST /sleep?level=1 (HTTP 404)."
    with running("fake_garbage_server") as url, pytest.raises(OperationError) as info:
        lifecycle.probe(url, "fake")
    assert info.value.message == f"the post-wake probe to {url} failed (its reply is not JSON)"
    assert lifecycle.diagnosis(RuntimeError("the engine folder vanished")) == "the engine folder vanished"
    assert lifecycle.diagnosis(RuntimeError()) == "an unexpected error (the gateway log has more)"
