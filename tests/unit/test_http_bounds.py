"""Bounded HTTP reading (llmdeck.util.http) and the one URL parser (llmdeck.util.net.parse_http_url).

Tiny raw-socket fakes on 127.0.0.1, each named for what it fakes: an endless body (bytes flowing at
full speed, so no read timeout ever fires), one endless SSE line (inside a chunk whose declared size is
1 GiB), a redirect to file://, a redirect loop, an endless response head. Every client path (status,
check and connect, the OpenAI client of bench and eval, the sync helpers, fetch's hub questions, the
gateway's health probe) must stop after its cap with a one-paragraph EndpointError (exit 1), fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.errors import EndpointError, OperationError, UsageError
from llmdeck.util import http as uhttp
from llmdeck.util.net import normalize_base_url, parse_http_url

MODELS = {"object": "list", "data": [{"id": "fake", "object": "model", "max_model_len": 4096}]}
Handler = Callable[[socket.socket, str, str], None]


def _send(conn: socket.socket, status: str, body: bytes, extra: str = "") -> None:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    conn.sendall((head + extra + "Connection: close\r\n\r\n").encode() + body)


def _endless(conn: socket.socket, head: bytes, prefix: bytes, seconds: float = 20.0) -> None:
    """``head`` + ``prefix`` then 64 KiB chunks of ``a`` until the client hangs up (or ``seconds``)."""
    conn.sendall(head + prefix)
    chunk, t0 = b"a" * 65536, time.monotonic()
    while time.monotonic() - t0 < seconds:
        conn.sendall(chunk)


_JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"


def _endless_body_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a peer whose every answer (but /health) is an endless JSON body, sent as fast as it goes."""
    if path == "/health":
        _send(conn, "200 OK", b"")
    else:
        _endless(conn, _JSON_HEAD, b'{"data": ["')


def _endless_chat_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a server that lists a model but answers every other request with an endless body."""
    if path == "/health":
        _send(conn, "200 OK", b"")
    elif path.startswith("/v1/models"):
        _send(conn, "200 OK", json.dumps(MODELS).encode())
    elif path.startswith(("/version", "/tokenize", "/metrics")):
        _send(conn, "404 Not Found", b"{}")
    else:
        _endless(conn, _JSON_HEAD, b'{"choices": [{"message": {"content": "')


def _endless_sse_line_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a server whose streams are one endless ``data:`` line, in a chunk that claims 1 GiB."""
    if path == "/health":
        _send(conn, "200 OK", b"")
    elif path.startswith("/v1/models"):
        _send(conn, "200 OK", json.dumps(MODELS).encode())
    else:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        _endless(conn, head, b"40000000\r\ndata: ")


def _redirect_to_file_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a server that redirects everything to file:///etc/passwd."""
    _send(conn, "302 Found", b"", "Location: file:///etc/passwd\r\n")


def _redirect_loop_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a server that redirects every path to itself."""
    _send(conn, "302 Found", b"", f"Location: {path}\r\n")


def _redirect_once_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a server that moved: /old/... redirects to /..., which answers."""
    if path.startswith("/old"):
        _send(conn, "301 Moved", b"", f"Location: {path[4:]}\r\n")
    else:
        _send(conn, "200 OK", json.dumps(MODELS).encode())


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


DEAD_PORT = _dead_port()


def _redirect_to_dead_host_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a server that redirects everything to another origin where nothing listens."""
    _send(conn, "307 Temporary Redirect", b"", f"Location: http://127.0.0.1:{DEAD_PORT}{path}\r\n")


def _endless_head_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a peer that starts a response head and never ends it."""
    _endless(conn, b"HTTP/1.1 200 OK\r\nX-Junk: ", b"")


def _fragmented_chunked_stream_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a well-behaved server whose chunked SSE reply arrives in odd fragments (a chunk split
    mid-way, its size line split, a trailer after the last chunk)."""
    events = [
        b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n',
        b'data: {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    wire = b"".join(f"{len(e):x}\r\n".encode() + e + b"\r\n" for e in events) + b"0\r\nX-T: 1\r\n\r\n"
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, len(wire), 7):
        conn.sendall(wire[i : i + 7])
        time.sleep(0.002)


def _read_request(conn: socket.socket) -> tuple[str, str]:
    conn.settimeout(5)
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(x.split(":", 1)[1]) for x in lines[1:] if x.lower().startswith("content-length:")), 0)
    with contextlib.suppress(OSError):
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
    parts = lines[0].split(" ")
    return (parts[0], parts[1]) if len(parts) > 1 else ("", "")


@contextlib.contextmanager
def _fake(handler: Handler) -> Iterator[str]:
    """Serve ``handler`` on a free port (gateway_fakes' raw socket server); yields the base URL."""
    from gateway_fakes import _raw_server

    def one(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            method, path = _read_request(conn)
            handler(conn, method, path)
        with contextlib.suppress(OSError):
            conn.close()

    with _raw_server(one) as url:
        yield url


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("LLMDECK_API_KEY", raising=False)


# ---- util.http ----------------------------------------------------------------------------------


def test_bounded_get_stops_an_endless_body_at_the_cap() -> None:
    with _fake(_endless_body_server) as url:
        t0 = time.monotonic()
        with pytest.raises(uhttp.BodyTooLarge) as info:
            uhttp.bounded_get(url + "/v1/models", limit=30)
    assert time.monotonic() - t0 < 15  # the fake runs 20 s; slack for loaded CI
    assert info.value.exit_code == 1
    assert f"The server at {url} sent more than 8 MiB for /v1/models" in info.value.message
    assert "OpenAI-compatible" in info.value.message and info.value.hint


def test_bounded_get_reports_a_redirect_to_file_and_a_loop() -> None:
    with _fake(_redirect_to_file_server) as url, pytest.raises(uhttp.Redirected) as info:
        uhttp.bounded_get(url + "/health", limit=5)
    assert "redirected /health to 'file:///etc/passwd'" in info.value.message
    assert "not http(s)" in info.value.message
    with _fake(_redirect_loop_server) as url, pytest.raises(uhttp.Redirected) as info:
        uhttp.bounded_get(url + "/health", limit=5)
    assert "more than 5 times" in info.value.message and "loop" in info.value.message


def test_bounded_get_follows_a_plain_http_redirect() -> None:
    with _fake(_redirect_once_server) as url:
        status, body = uhttp.bounded_get(url + "/old/v1/models", limit=5)
    assert status == 200 and json.loads(body) == MODELS


def test_a_redirect_location_is_shown_redacted_and_without_control_characters() -> None:
    shown = uhttp.shown_location("http://user:s3cret@evil/\x1b[2Jx")
    assert "s3cret" not in shown and "\x1b" not in shown


def test_capped_lines_stops_one_endless_line() -> None:
    def chunks() -> Iterator[bytes]:
        yield b"data: 1\n\ndata: "
        while True:
            yield b"x" * 65536

    lines = uhttp.capped_lines(chunks(), "http://h:1/v1/chat/completions", line_cap=1 << 20)
    assert next(lines) == b"data: 1"
    with pytest.raises(uhttp.BodyTooLarge, match="a line longer than 1 MiB for /v1/chat/completions"):
        list(lines)


# ---- every client path --------------------------------------------------------------------------


def test_status_url_says_an_endless_models_list_is_not_openai() -> None:
    from llmdeck.runtime.urlstatus import url_status

    with _fake(_endless_body_server) as url:
        st = url_status(url, limit=30)
    assert st.state == "not_openai"
    assert "sent more than 8 MiB for /v1/models" in st.detail


def test_status_url_says_where_the_server_redirected(capsys: pytest.CaptureFixture[str]) -> None:
    with _fake(_redirect_to_file_server) as url:
        code, _out, err = run_cli(["status", url, "--timeout", "5"], capsys)
    flat = " ".join(err.split())
    assert code == 1
    assert "redirected /health to 'file:///etc/passwd'" in flat
    assert "does not speak HTTP" not in flat


def test_status_url_blames_the_redirect_not_the_server_that_answered(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The server answered with a redirect to a host that accepts no connection: not "unreachable"
    (which named the URL that did answer), but where it redirected and that nothing listens there."""
    with _fake(_redirect_to_dead_host_server) as url:
        code, _out, err = run_cli(["status", url, "--timeout", "5"], capsys)
    flat = " ".join(err.split())
    assert code == 1 and "unreachable" not in flat
    assert f"redirected /health to 'http://127.0.0.1:{DEAD_PORT}/health'" in flat
    assert "where nothing accepts connections" in flat


def test_sync_get_models_stops_an_endless_body() -> None:
    from llmdeck.client import ResponseTooLargeError, get_models

    with _fake(_endless_body_server) as url, pytest.raises(ResponseTooLargeError) as info:
        get_models(url, timeout_s=30)
    assert info.value.exit_code == 1 and info.value.kind == "too_large"


def test_openai_client_caps_models_chat_and_one_endless_stream_line() -> None:
    from llmdeck.client import OpenAIClient, ResponseTooLargeError, Timeouts

    async def go(url: str) -> list[str]:
        messages = [{"role": "user", "content": "hi"}]
        async with OpenAIClient(url, timeouts=Timeouts(read=30, total=60, probe=30)) as client:
            errors = []
            for call in (
                client.chat("fake", messages, max_tokens=4),
                client.stream_chat("fake", messages, max_tokens=4),
            ):
                with pytest.raises(ResponseTooLargeError) as info:
                    await call
                errors.append(info.value.message)
            return errors

    t0 = time.monotonic()
    with _fake(_endless_chat_server) as url:
        chat_error, _ = asyncio.run(go(url))
    with _fake(_endless_sse_line_server) as url:
        _, stream_error = asyncio.run(go(url))
    with _fake(_endless_body_server) as url, pytest.raises(ResponseTooLargeError):
        asyncio.run(OpenAIClient(url).models())
    assert time.monotonic() - t0 < 15  # the fake runs 20 s; slack for loaded CI
    assert "more than 8 MiB for /v1/chat/completions" in chat_error
    assert "a line longer than 4 MiB for /v1/chat/completions" in stream_error


def test_openai_client_reports_a_redirect() -> None:
    from llmdeck.client import OpenAIClient, RedirectedError

    with _fake(_redirect_to_file_server) as url, pytest.raises(RedirectedError, match="file:///etc/passwd"):
        asyncio.run(OpenAIClient(url).models())


def test_lean_transport_still_reads_a_fragmented_chunked_stream() -> None:
    from llmdeck.client import OpenAIClient, Timeouts

    async def go(url: str) -> str:
        async with OpenAIClient(url, timeouts=Timeouts(read=5, total=10)) as client:
            res = await client.stream_chat("fake", [{"role": "user", "content": "hi"}], max_tokens=4)
            assert res.done and res.finish_reason == "stop" and len(res.chunk_times) == 2
            return res.text

    with _fake(_fragmented_chunked_stream_server) as url:
        assert asyncio.run(go(url)) == "Hello"


def test_lean_transport_stops_an_endless_response_head() -> None:
    from llmdeck.client import ConnectionDroppedError, OpenAIClient, Timeouts

    async def go(url: str) -> None:
        async with OpenAIClient(url, timeouts=Timeouts(read=30, total=60)) as client:
            await client.stream_chat("fake", [{"role": "user", "content": "hi"}], max_tokens=4)

    with _fake(_endless_head_server) as url, pytest.raises(ConnectionDroppedError, match="64 KiB"):
        asyncio.run(go(url))


def test_checks_http_caps_json_and_stream_lines_and_stops_at_a_redirect() -> None:
    from llmdeck.checks.http import Http

    with _fake(_endless_chat_server) as url:
        http = Http(url, None, timeout=30)
        with pytest.raises(uhttp.BodyTooLarge, match="for /v1/chat/completions"):
            http.request("POST", "/v1/chat/completions", {"model": "fake"})
        http.close()
    with _fake(_endless_sse_line_server) as url:
        http = Http(url, None, timeout=30)
        with pytest.raises(uhttp.BodyTooLarge, match="a line longer than 4 MiB"):
            http.stream("/v1/chat/completions", {"model": "fake", "stream": True})
        http.close()
    with _fake(_redirect_loop_server) as url:
        http = Http(url, None, timeout=30)
        with pytest.raises(uhttp.Redirected, match="redirected /health to '/health'"):
            http.request("GET", "/health")
        http.close()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["check", "{url}", "--timeout", "30", "--deadline", "60"], "sent more than 8 MiB for /v1/chat"),
        (["connect", "opencode", "--server", "{url}", "--timeout", "30", "--print"], "is it an OpenAI"),
    ],
    ids=["check", "connect"],
)
def test_cli_stops_an_endless_chat_reply(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # /v1/models answers; connect's first endless reply is another question, check's is the chat
    with _fake(_endless_chat_server) as url:
        t0 = time.monotonic()
        code, _out, err = run_cli([a.format(url=url) for a in argv], capsys)
    flat = " ".join(err.split())
    assert code == 1, flat
    assert time.monotonic() - t0 < 15  # the fake runs 20 s; slack for loaded CI
    assert says in flat and "Traceback" not in err and "internal error" not in flat


def test_gateway_probe_marks_an_endless_backend_down() -> None:
    import httpx

    from llmdeck.gateway.config import ResolvedBackend
    from llmdeck.gateway.routing import BackendState, Router

    async def go(url: str) -> BackendState:
        state = BackendState(ResolvedBackend(url=url, label="b", served_model=None))
        async with httpx.AsyncClient() as client:
            for _ in range(2):  # two failed probes in a row: down
                await Router.probe(None, client, state, 30)  # type: ignore[arg-type]
        return state

    with _fake(_endless_body_server) as url:
        t0 = time.monotonic()
        state = asyncio.run(go(url))
    assert time.monotonic() - t0 < 15  # the fake runs 20 s; slack for loaded CI
    assert not state.healthy and state.probe_failures == 2
    assert state.last_error == "health probe: its /v1/models answer was over the size cap"


# ---- fetch --------------------------------------------------------------------------------------


def test_fetch_stops_an_endless_hub_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("huggingface_hub")
    with _fake(_endless_body_server) as url:
        t0 = time.monotonic()
        argv = ["fetch", "Qwen/Qwen3-0.6B", "--endpoint", url, "--timeout", "30", "--config-only"]
        code, _out, err = run_cli([*argv, "--local-dir", str(tmp_path / "m")], capsys)
    flat = " ".join(err.split())
    assert code == 1, flat
    assert time.monotonic() - t0 < 15  # the fake runs 20 s; slack for loaded CI
    assert "sent more than 16 MiB for /api/models/Qwen/Qwen3-0.6B/revision/main" in flat
    assert "Hugging Face hub or mirror" in flat and "--endpoint" in flat


def _hooked_hub(monkeypatch: pytest.MonkeyPatch | None = None, cap: int | None = None) -> None:
    """Skip unless huggingface_hub's client can be hooked (>= 1.0); with ``monkeypatch``, no Xet, and
    ``cap`` as fetch's config-file cap."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    if not hasattr(huggingface_hub, "set_client_factory"):
        pytest.skip("huggingface_hub < 1.0: its client cannot be hooked")
    if monkeypatch is not None:
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        if cap is not None:
            from llmdeck.fetch import hubcap

            monkeypatch.setattr(hubcap, "CONFIG_FILE_CAP", cap)


def _answer_hub_api(conn: socket.socket, path: str, size: int) -> bool:
    """A hub mirror's API answer about repo o/m holding one config.json of ``size``; False: no API path."""
    if not path.startswith("/api/"):
        return False
    info: object = {"id": "o/m", "sha": "a" * 40, "siblings": [{"rfilename": "config.json"}]}
    if "/tree/" in path:
        info = [{"type": "file", "path": "config.json", "size": size, "oid": "b" * 40}]
    _send(conn, "200 OK", json.dumps(info).encode())
    return True


def _fetch_config(
    server: Handler, timeout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, float]:
    """`llmdeck fetch o/m --config-only` from the fake hub ``server``: exit code, stderr, seconds."""
    with _fake(server) as url:
        t0 = time.monotonic()
        argv = ["fetch", "o/m", "--endpoint", url, "--timeout", timeout, "--config-only"]
        code, _out, err = run_cli([*argv, "--local-dir", str(tmp_path / "m")], capsys)
    return code, " ".join(err.split()), time.monotonic() - t0


def _endless_config_hub_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a hub mirror whose API answers, but whose config.json never ends."""
    sha = "a" * 40
    if _answer_hub_api(conn, path, 100):
        return
    head = f'HTTP/1.1 200 OK\r\nETag: "e"\r\nX-Repo-Commit: {sha}\r\nContent-Type: text/plain\r\n'
    if method == "HEAD":
        conn.sendall((head + "Content-Length: 100\r\nConnection: close\r\n\r\n").encode())
        return
    _endless(conn, (head + "Connection: close\r\n\r\n").encode(), b"{")


def test_fetch_config_only_caps_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _hooked_hub(monkeypatch, cap=1 << 20)
    code, flat, seconds = _fetch_config(_endless_config_hub_server, "10", tmp_path, capsys)
    assert code == 1, flat
    assert seconds < 15  # the fake runs 20 s; slack for loaded CI
    assert "sent more than 1 MiB for /o/m/resolve/" in flat and "config.json" in flat
    from llmdeck.fetch import hubcap

    assert hubcap.cap_for("/o/m/resolve/main/model.safetensors", config_only=False) is None


def _trickling_hub_server() -> Handler:
    """Fakes a hub mirror that answers the first question about a repo, then trickles every API
    answer (a byte every 0.2 s: never a read timeout, never an end)."""
    asked: list[str] = []

    def handle(conn: socket.socket, method: str, path: str) -> None:
        asked.append(path)
        if len(asked) == 1:
            _send(conn, "200 OK", json.dumps({"id": "o/m", "sha": "a" * 40, "siblings": []}).encode())
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(100):
            conn.sendall(b" ")
            time.sleep(0.2)

    return handle


def test_fetch_stops_a_trickling_hub_api_within_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hooked_hub()
    with _fake(_trickling_hub_server()) as url:
        t0 = time.monotonic()
        argv = ["fetch", "o/m", "--endpoint", url, "--timeout", "1", "--config-only"]
        code, _out, err = run_cli([*argv, "--local-dir", str(tmp_path / "m")], capsys)
    flat = " ".join(err.split())
    assert code == 1, flat
    assert time.monotonic() - t0 < 15  # the fake runs 20 s; slack for loaded CI
    assert "is not answering" in flat and "within 1 s" in flat and "--timeout" in flat


_TRICKLING = threading.Event()  # set once a config.json trickles


def _trickling_config_hub_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a hub mirror whose API answers at once and whose config.json trickles (a byte every
    0.2 s of 100,000: never silent for a read timeout, never whole)."""
    if _answer_hub_api(conn, path, 100000):
        return
    head = f'HTTP/1.1 200 OK\r\nETag: "e"\r\nX-Repo-Commit: {"a" * 40}\r\nContent-Length: 100000\r\n'
    conn.sendall((head + "Connection: close\r\n\r\n").encode())
    if method == "HEAD":
        return
    _TRICKLING.set()
    for _ in range(300):
        conn.sendall(b" ")
        time.sleep(0.2)


def test_fetch_stops_a_trickling_config_file_within_ten_timeouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the hub's API answers had a deadline: a config.json a byte every 2 s ran for minutes."""
    _hooked_hub(monkeypatch)
    # --timeout 0.5: the hub's API replies within it on a loaded machine (at 0.3 s it once timed out first)
    code, flat, seconds = _fetch_config(_trickling_config_hub_server, "0.5", tmp_path, capsys)
    assert code == 1 and seconds < 20, flat  # 5 s deadline; the trickle runs 60 s
    assert "is not answering" in flat and "config.json within 5 s" in flat


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_fetch_stops_at_once_on_ctrl_c_while_a_file_downloads(tmp_path: Path, sig: signal.Signals) -> None:
    """huggingface_hub's download pool waits for its workers before Ctrl-C gets out: fetch had gone on
    for a minute (its retries) after the signal, and would download every file queued."""
    import os
    import subprocess
    import sys

    from repo_paths import ROOT

    pytest.importorskip("huggingface_hub")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_DISABLE_XET": "1",
    }
    with _fake(_trickling_config_hub_server) as url:
        _TRICKLING.clear()
        argv = [sys.executable, "-m", "llmdeck", "fetch", "o/m", "--endpoint", url, "--timeout", "60"]
        proc = subprocess.Popen(
            [*argv, "--config-only", "--local-dir", str(tmp_path / "m")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # python, huggingface_hub, the API answer: 2 s under load here, more on CI (a fixed 6 s was a guess)
        assert _TRICKLING.wait(60), "the config.json never started trickling"
        time.sleep(0.5)
        proc.send_signal(sig)
        t0 = time.monotonic()
        try:
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], err
    assert time.monotonic() - t0 < 15 and "Traceback" not in err  # not the minute of retries


# ---- one URL parser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[::1", "no closing bracket"),
        ("http://127.0.0.1:abc", "port 'abc' is not a number"),
        ("http://127.0.0.1:0", "port 0 is not between 1 and 65535"),
        ("http://127.0.0.1:99999", "port 99999 is not between 1 and 65535"),
        ("http://bad host:8000", "'bad host' is not an IP address"),
        ("ftp://127.0.0.1:21", "http:// or https://"),
        ("http://:8000", "names no host"),
        # had been taken as a server's (or a gateway backend's) URL
        ("http://127.0.0.1:8000/v1 ; rm -rf ~", "its path holds a space or a control character"),
        ("http://127.0.0.1:8000/v1\x1b[2J", "its path holds a space or a control character"),
    ],
)
def test_parse_http_url_rejects_what_cannot_be_a_server(url: str, says: str) -> None:
    with pytest.raises(UsageError) as info:
        normalize_base_url(url)
    assert info.value.exit_code == 2
    assert says in info.value.message and info.value.hint


def test_parse_http_url_keeps_what_is_fine() -> None:
    assert normalize_base_url("127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert normalize_base_url("http://[::1]:8000") == "http://[::1]:8000"
    assert normalize_base_url("https://gpu-box.lan/proxy/v1") == "https://gpu-box.lan/proxy"
    assert normalize_base_url("http://vllm_server:8000") == "http://vllm_server:8000"
    assert parse_http_url("https://hf-mirror.com/") == "https://hf-mirror.com"
    with pytest.raises(UsageError) as info:
        parse_http_url("http://user:s3cret@[::1")
    assert "s3cret" not in info.value.message


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://127.0.0.1:abc", "http://127.0.0.1:0", "http://bad host"]
)
@pytest.mark.parametrize("command", ["check", "status", "connect"])
def test_cli_rejects_a_bad_url_with_exit_2(
    command: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "check": ["check", url],
        "status": ["status", url],
        "connect": ["connect", "opencode", "--server", url],
    }
    code, _out, err = run_cli(argv[command] + (["--print"] if command == "connect" else []), capsys)
    flat = " ".join(err.split())
    assert code == 2, flat
    assert "is not a usable http(s) URL" in flat and "Give a URL like" in flat
    assert "internal error" not in flat and "unreachable" not in flat.lower()


@pytest.mark.parametrize("endpoint", ["http://[::1", "http://hub:99999", "https://bad host"])
def test_fetch_rejects_a_bad_endpoint_with_exit_2(
    endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("huggingface_hub")
    argv = ["fetch", "Qwen/Qwen3-0.6B", "--endpoint", endpoint, "--local-dir", str(tmp_path / "m")]
    code, _out, err = run_cli(argv, capsys)
    flat = " ".join(err.split())
    assert code == 2, flat
    assert "--endpoint" in flat and "is not a usable http(s) URL" in flat


def test_endpoint_errors_are_one_paragraph() -> None:
    err = uhttp.BodyTooLarge("http://h:1/v1/models", 8 << 20)
    assert isinstance(err, EndpointError) and "\n" not in err.render()


def test_status_url_says_a_models_reply_of_the_wrong_shape_is_not_openai() -> None:
    """`{"data": 5}` had been an internal error (TypeError: 'int' object is not iterable)."""
    from llmdeck.runtime.urlstatus import _parse_models

    for body in (b'{"data": 5}', b'{"data": "x"}', b'{"data": {"id": "m"}}'):
        st = _parse_models("http://h:1", (200, body))
        assert st.state == "not_openai" and "not a model list" in st.detail, body


def _trickle_body_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a peer whose answer is a 1000-byte JSON body sent a byte every 0.2 s (no read ever times
    out, the body never ends in time)."""
    conn.sendall(_JSON_HEAD.replace(b"\r\n\r\n", b"\r\nContent-Length: 1000\r\n\r\n") + b"{")
    for _ in range(50):
        time.sleep(0.2)
        conn.sendall(b" ")


@pytest.mark.parametrize("handler", [_endless_body_server, _trickle_body_server], ids=["endless", "trickle"])
def test_the_post_wake_probe_is_bounded_as_a_whole(handler: Handler, monkeypatch: pytest.MonkeyPatch) -> None:
    """It read the whole reply (``resp.content``) before its 1 MiB cap, with a timeout only between
    reads: an endless body filled the memory, a trickled one held the wake for ever."""
    from llmdeck.gateway import lifecycle

    monkeypatch.setattr(lifecycle, "PROBE_TIMEOUT_S", 1.0)
    with _fake(handler) as url:
        t0 = time.monotonic()
        with pytest.raises(OperationError, match="no whole reply within 1 s"):
            lifecycle.probe(url, "fake")
    assert time.monotonic() - t0 < 5


def test_sleep_and_wake_are_bounded_as_a_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models on demand: /sleep and /wake_up had SLEEP_TIMEOUT_S only between reads, so an engine
    trickling its reply held the model's sleep or wake for ever."""
    from llmdeck.gateway import lifecycle

    monkeypatch.setattr(lifecycle, "SLEEP_TIMEOUT_S", 1.0)
    with _fake(_trickle_body_server) as url:
        for call in (lambda: lifecycle.sleep(url, 1), lambda: lifecycle.wake(url, 1)):
            t0 = time.monotonic()
            with pytest.raises(OperationError, match="refused POST"):
                call()
            assert time.monotonic() - t0 < 5


def _endless_health_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes something else on an engine's port: /health is a 200 whose body runs on (48 MiB as fast as
    it goes, then silence)."""
    conn.sendall(_JSON_HEAD)
    chunk = b"a" * 65536
    for _ in range(48 * 16):
        conn.sendall(chunk)
    time.sleep(10)


def test_the_readiness_wait_caps_what_it_reads(tmp_path: Path) -> None:
    """`up` polled /health and /v1/models with ``client.get``, which reads a whole body: an endless one
    filled the memory for 2 s each poll. Now each body stops at JSON_CAP (8 MiB): never ready."""
    import os
    import tracemalloc

    from llmdeck.engines.process import identify
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.errors import ServerStartError
    from llmdeck.runtime.launcher import wait_ready
    from llmdeck.runtime.state import ServerRecord
    from llmdeck.settings import Settings

    log = tmp_path / "e.log"
    log.write_text("# llmdeck: header\n")
    with _fake(_endless_health_server) as url:
        port = int(url.rsplit(":", 1)[1])
        record = ServerRecord(
            name="e",
            spec=LaunchSpec(name="e", engine="venv", model="m", port=port),
            argv=["vllm", "serve", "m"],
            pid=os.getpid(),  # the test process stands in for the engine (and listens on the port)
            process=identify(os.getpid()),
            log_path=log,
        )
        tracemalloc.start()
        try:
            with pytest.raises(ServerStartError, match="was not ready"):
                wait_ready(record, Settings(state_dir=tmp_path / "state"), timeout_s=1, poll_s=0.1)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 24 << 20, f"{peak >> 20} MiB"


def _gzip_config_hub_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a hub mirror whose API answers and whose config.json is a stacked gzip bomb (64 MiB of
    zeros in about 300 bytes, ``Content-Encoding: gzip, gzip``)."""
    from fake_servers import gzip_bomb

    if _answer_hub_api(conn, path, 100):
        return
    head = f'HTTP/1.1 200 OK\r\nETag: "e"\r\nX-Repo-Commit: {"a" * 40}\r\nContent-Type: text/plain\r\n'
    if method == "HEAD":
        conn.sendall((head + "Content-Length: 100\r\nConnection: close\r\n\r\n").encode())
        return
    _send(
        conn,
        "200 OK",
        gzip_bomb(),
        f'ETag: "e"\r\nX-Repo-Commit: {"a" * 40}\r\nContent-Encoding: gzip, gzip\r\n',
    )


def test_fetch_config_only_does_not_inflate_a_gzip_bomb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap counted the bytes as sent, huggingface_hub wrote them inflated: 300 bytes of gzip inside
    gzip became a 64 MiB config.json past a 1 MiB cap (gigabytes, with a bigger bomb)."""
    _hooked_hub(monkeypatch, cap=1 << 20)
    code, flat, seconds = _fetch_config(_gzip_config_hub_server, "10", tmp_path, capsys)
    written = [p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()]
    assert max(written, default=0) < 1 << 20, written
    assert code == 1 and seconds < 15, flat
    assert "compressed" in flat and "config.json" in flat


def _redirected_gzip_config_hub_server(conn: socket.socket, method: str, path: str) -> None:
    """Fakes a hub mirror that redirects config.json to /blob/config.json, a stacked gzip bomb there."""
    if "/resolve/" in path and method == "GET":
        _send(
            conn,
            "302 Found",
            b"",
            f'ETag: "e"\r\nX-Repo-Commit: {"a" * 40}\r\nLocation: /blob/config.json\r\n',
        )
    else:
        _gzip_config_hub_server(conn, method, path)


def test_fetch_config_only_caps_a_config_file_behind_a_redirect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap (and the plain ask) went by the path: a redirect off /resolve/ took a file out of both."""
    _hooked_hub(monkeypatch)
    code, flat, seconds = _fetch_config(_redirected_gzip_config_hub_server, "10", tmp_path, capsys)
    assert code == 1 and seconds < 15, flat
    assert "/blob/config.json answer compressed" in flat, flat
