"""The gateway against a client's odd requests (a TINY FAKE upstream, tests/gateway_fakes.py): a control
character in the path, a wrong method on an API the backend serves, ``"stream": "false"``, a whole answer
slower than the idle timeout. Each: an answer in the API's shape, an access-log line with the path as
data, nothing left counted in flight."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_fakes import FakeOpenAIUpstream, UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.settings import Settings

CHAT = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}
HEALTH = "health: {interval_s: 60, timeout_s: 0.5}\n"


@contextlib.contextmanager
def stack(tmp_path: Path, timeouts: str) -> Iterator[tuple[str, FakeOpenAIUpstream]]:
    up = FakeOpenAIUpstream()
    with UvicornThread(up.app) as backend:
        text = f"routes:\n  - model: a\n    backends: ['{backend.url}']\ntimeouts: {timeouts}\n" + HEALTH
        path = tmp_path / "gateway.yaml"
        path.write_text(text, encoding="utf-8")
        loaded = parse_config(text, source=path, settings=Settings(state_dir=tmp_path / "state"))
        with UvicornThread(build_app(loaded)) as gw:
            yield gw.url, up


FAST = "{connect_s: 1, first_byte_s: 1, response_s: 10, idle_s: 2}"


def _access(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "llmdeck.gateway.access"]


@pytest.mark.parametrize("char", ["%01", "%00", "%1b[2K", "%7f", "%0aINFO%20forged", "%E2%80%AE"])
def test_a_control_character_in_the_path_is_a_400_logged_as_data(
    tmp_path: Path, char: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """It had been a 500 with a traceback (httpx.InvalidURL), no access-log line, and the in-flight gauge
    (on demand: the model's lease) never given back."""
    with stack(tmp_path, FAST) as (gw, up), caplog.at_level(logging.INFO, "llmdeck.gateway.access"):
        r = httpx.post(f"{gw}/v1/messages{char}", json=CHAT, timeout=10)
        # a newline ends the route's match: no such endpoint, a 404 that says so
        assert r.status_code == (404 if "%0a" in char else 400)
        assert "control character" in r.json()["error"]["message"] or r.status_code == 404
        metrics = httpx.get(f"{gw}/metrics").text
    in_flight = [line for line in metrics.splitlines() if line.startswith("llmdeck_gateway_in_flight{")]
    assert not up.bodies and all(line.endswith(" 0.0") for line in in_flight)
    line = next(m for m in _access(caplog) if m.startswith("POST /v1/messages"))
    assert (
        f"status={r.status_code}" in line and "\n" not in line and "\x1b" not in line and "\u202e" not in line
    )
    assert "Traceback" not in capfd.readouterr().err


def test_no_such_endpoint_gets_an_access_log_line_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with stack(tmp_path, FAST) as (gw, _), caplog.at_level(logging.INFO, "llmdeck.gateway.access"):
        assert httpx.get(f"{gw}/nothing%1b[31m").status_code == 404
        assert httpx.post(f"{gw}/health").status_code == 405
    lines = _access(caplog)
    assert any(m.startswith("GET /nothing\\x1b[31m ") and "status=404" in m for m in lines)
    assert any(m.startswith("POST /health ") and "status=405" in m for m in lines)


def test_a_wrong_method_on_an_api_the_backend_serves_is_a_405_not_upgrade_vllm(tmp_path: Path) -> None:
    with stack(tmp_path, FAST) as (gw, _):
        r = httpx.get(f"{gw}/v1/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    assert "send a POST" in r.json()["error"]["message"] and "upgrade" not in r.text


@pytest.mark.parametrize("stream", [False, "false", "no", 0, "0"])
def test_a_whole_answer_slower_than_the_idle_and_first_byte_times_is_waited_for(
    tmp_path: Path, stream: object
) -> None:
    """A non-streamed answer may take up to response_s (10 s here). It had been cut at idle_s (2 s: the
    transport's read timeout, reported as "the connection timed out"), and ``"stream": "false"`` was
    taken for a stream (cut at first_byte_s); either way the backend was marked down."""
    with stack(tmp_path, FAST) as (gw, up):
        up.delay_s = 3.0
        r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "stream": stream}, timeout=20)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi"
        assert httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]["healthy"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"model": "a", "messages": [], "temperature": NaN}', "NaN, which is no JSON number"),
        (b'{"model": "a", "messages": [], "max_tokens": Infinity}', "Infinity, which is no JSON number"),
        (b'{"model": "a", "max_tokens": ' + b"9" * 5000 + b"}", "over 4,300 digits"),
        # read as infinity, and written to the backend as `Infinity` (no JSON) once the body was rewritten
        (b'{"model": "a", "messages": [], "max_tokens": 1e999}', "1e999, a number past a 64-bit float"),
        (b'{"model": "a", "messages": [], "temperature": -2.5E+400}', "-2.5E+400, a number past"),
        # over 1 MiB: parsed in a thread, the same answers
        (b'{"model": "a", "pad": "' + b"x" * (2 << 20) + b'", "top_p": -Infinity}', "-Infinity"),
        (b'{"model": "a", "deep": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nests too deeply"),
    ],
    ids=["nan", "infinity", "5000-digits", "1e999", "minus-2.5e400", "big-with-infinity", "big-and-deep"],
)
def test_a_body_python_reads_but_json_has_not_is_a_400_in_words(
    tmp_path: Path, body: bytes, words: str
) -> None:
    """NaN/Infinity had been passed on to the backend; a 5000-digit number was 'not valid JSON'; 1e999
    reached it as `Infinity`."""
    with stack(tmp_path, FAST) as (gw, up):
        r = httpx.post(f"{gw}/v1/chat/completions", content=body, timeout=20)
    assert r.status_code == 400 and words in r.json()["error"]["message"] and not up.bodies


def test_a_big_body_is_parsed_and_sent_whole(tmp_path: Path) -> None:
    """A body over 1 MiB is parsed and encoded again in a thread (a 30 MB one had stopped the gateway's
    event loop for seconds): it reaches the backend whole, with the served model name."""
    pad = "y" * (3 << 20)
    with stack(tmp_path, FAST) as (gw, up):
        r = httpx.post(f"{gw}/v1/chat/completions", json={**CHAT, "pad": pad}, timeout=20)
    assert r.status_code == 200 and up.bodies[-1]["pad"] == pad and up.bodies[-1]["model"] == "fake-served"


def test_a_body_sent_a_byte_at_a_time_is_cut_at_the_whole_answer_time(tmp_path: Path) -> None:
    """Each byte within idle_s (2 s) but the body never whole: it had held the connection for ever."""
    import socket
    import time

    with stack(tmp_path, "{connect_s: 1, first_byte_s: 1, response_s: 3, idle_s: 2}") as (gw, _):
        port = int(gw.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            head = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n"
            sock.sendall(head.encode())
            sock.settimeout(1.0)
            t0, reply = time.monotonic(), b""
            while time.monotonic() - t0 < 15 and b"stopped arriving" not in reply:
                with contextlib.suppress(OSError):
                    sock.sendall(b" ")
                with contextlib.suppress(TimeoutError):
                    reply += sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 408") and b"not whole within 3 s" in reply
    assert time.monotonic() - t0 < 12


def test_a_long_path_makes_no_long_access_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Any client, keyless too, writes one access-log line per request: a 60 KB path had made a 60 KB
    line (the gateway log grew by the path's size per request, ~140 bytes for a usual one)."""
    long = "/v1/" + "p" * 60000
    with stack(tmp_path, FAST) as (gw, _), caplog.at_level(logging.INFO, "llmdeck.gateway.access"):
        assert httpx.post(f"{gw}{long}", json={"model": "nothing"}, timeout=10).status_code == 404
        assert httpx.get(f"{gw}/x{'q' * 60000}", timeout=10).status_code == 404
    lines = [m for m in _access(caplog) if "/v1/ppp" in m or "/xqqq" in m]
    assert len(lines) == 2 and all(len(m) < 400 for m in lines), [len(m) for m in lines]
    assert "…(+59804 chars)" in lines[0]
