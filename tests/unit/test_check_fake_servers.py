"""Unit tests of probe logic against tiny fake HTTP servers (named for what they fake).

These cover what the real CPU engine cannot show in CI: a stream that breaks off without usage or
[DONE], and a server started with --api-key (401 without the key). The integration tests in
test_check_integration.py cover the real engine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from http_fakes import JsonHandler
from llmdeck.checks import run_checks
from llmdeck.settings import Settings

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "root": "/m", "max_model_len": 2048}]}


class _Handler(JsonHandler):
    key: str | None = None
    broken_stream = False
    models: dict[str, Any] = MODELS
    tool_text: str | None = None  # a model that writes its tool call as text the parser did not catch
    wrong_shapes = False  # chunks and usage that are JSON but not OpenAI's shape

    def _authorized(self) -> bool:
        if self.key is None or not self.path.startswith("/v1"):
            return True
        return self.headers.get("Authorization") == f"Bearer {self.key}"

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif not self._authorized():
            self._json(401, {"error": "Unauthorized"})
        elif self.path == "/v1/models":
            self._json(200, self.models)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self._authorized():
            self._json(401, {"error": "Unauthorized"})
        elif self.path == "/v1/chat/completions" and body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
            if self.wrong_shapes:
                bad: list[Any] = [{"choices": "x"}, {"choices": ["x"]}, {"choices": [{"delta": "hi"}]}]
                bad.append({"choices": [{"delta": {"content": 5, "tool_calls": ["x", {"function": "f"}]}}]})
                bad.append({"choices": [], "usage": "lots"})
                self.wfile.write(b"".join(f"data: {json.dumps(b)}\n\n".encode() for b in bad))
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if not self.broken_stream:
                usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
                self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/v1/chat/completions":
            text = self.tool_text if (self.tool_text and body.get("tools")) else "hi"
            msg = {"role": "assistant", "content": text, "tool_calls": []}
            usage: Any = "lots" if self.wrong_shapes else {}
            self._json(
                200, {"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}], "usage": usage}
            )
        else:
            self._json(404, {"detail": "Not Found"})


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def fake_broken_sse_server() -> Iterator[str]:
    """FakeBrokenSSEServer: streams one chunk, then drops the connection (no usage, no [DONE])."""
    handler = type("FakeBrokenSSEServer", (_Handler,), {"broken_stream": True})
    yield from _serve(handler)


@pytest.fixture()
def fake_api_key_server() -> Iterator[str]:
    """FakeApiKeyServer: like `vllm serve --api-key sk-right`: /v1/* answers 401 without the key."""
    handler = type("FakeApiKeyServer", (_Handler,), {"key": "sk-right"})
    yield from _serve(handler)


@pytest.fixture()
def fake_wrong_parser_server() -> Iterator[str]:
    """FakeWrongParserServer: Qwen3.6 served with a parser that misses its XML tool calls (seed 004)."""
    qwen = {"object": "list", "data": [{"id": "qwen3.6-35b-a3b", "root": "/m", "max_model_len": 131072}]}
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
        "</tool_call>"
    )
    handler = type("FakeWrongParserServer", (_Handler,), {"models": qwen, "tool_text": text})
    yield from _serve(handler)


@pytest.fixture()
def fake_wrong_shapes_server() -> Iterator[str]:
    """FakeWrongShapesServer: chunks whose choices, delta, content, tool calls and usage have the wrong
    JSON types, and a chat reply whose usage is a string."""
    handler = type("FakeWrongShapesServer", (_Handler,), {"wrong_shapes": True})
    yield from _serve(handler)


def _settings(tmp_path: Path, key: str | None = None) -> Settings:
    return Settings(state_dir=tmp_path / "state", api_key=key)


def test_stream_without_done_or_usage_fails(fake_broken_sse_server: str, tmp_path: Path) -> None:
    report = run_checks(
        fake_broken_sse_server,
        client="openai",
        model=None,
        api_key=None,
        settings=_settings(tmp_path),
        probes=["streaming_usage"],
    )
    probe = report.probe("streaming_usage")
    assert probe.status == "fail" and probe.required
    assert "[DONE]" in probe.summary
    assert probe.data["chunks"] == 1 and probe.data["usage"] is None
    assert not report.ok


def test_missing_api_key_fails_and_skips_the_rest(fake_api_key_server: str, tmp_path: Path) -> None:
    report = run_checks(
        fake_api_key_server,
        client="openai",
        model=None,
        api_key=None,
        settings=_settings(tmp_path),
        probes=["chat"],
    )
    key = report.probe("api_key")
    assert key.status == "fail" and "401" in key.summary and "--api-key" in (key.fix or "")
    assert report.server.api_key_required is True
    assert report.probe("models").status == "skipped"
    assert report.probe("chat").status == "skipped"
    assert not report.ok


def test_wrong_and_right_api_key(fake_api_key_server: str, tmp_path: Path) -> None:
    wrong = run_checks(
        fake_api_key_server,
        client=None,
        model=None,
        api_key="sk-wrong",
        settings=_settings(tmp_path),
        probes=[],
    )
    assert wrong.probe("api_key").status == "fail" and "rejects" in wrong.probe("api_key").summary
    # the key from settings (LLMDECK_API_KEY) is used when none is passed
    right = run_checks(
        fake_api_key_server,
        client="openai",
        model=None,
        api_key=None,
        settings=_settings(tmp_path, "sk-right"),
        probes=["chat", "streaming_usage"],
    )
    assert right.probe("api_key").status == "pass"
    assert right.probe("models").status == "pass" and right.server.max_model_len == 2048
    assert right.probe("chat").status == "pass" and right.probe("streaming_usage").status == "pass"
    assert right.ok


def test_tool_call_left_in_content_means_wrong_parser(fake_wrong_parser_server: str, tmp_path: Path) -> None:
    report = run_checks(
        fake_wrong_parser_server,
        client="opencode",
        model=None,
        api_key=None,
        settings=_settings(tmp_path),
        probes=["tool_auto"],
    )
    probe = report.probe("tool_auto")
    assert probe.status == "fail" and probe.required
    assert "--tool-call-parser qwen3_coder" in (probe.fix or "")
    assert report.server.auto_tool_choice is True
    assert not report.ready


@pytest.mark.parametrize("client", ["openai", "opencode", "continue"])
def test_wrong_shaped_chunks_and_usage_are_probe_results(
    fake_wrong_shapes_server: str, tmp_path: Path, client: str
) -> None:
    """A chunk or usage of the wrong JSON type is what the server sent, not llmdeck's bug: the probes
    report on it (before, check stopped with an internal AttributeError)."""
    report = run_checks(
        fake_wrong_shapes_server, client=client, model=None, api_key=None, settings=_settings(tmp_path)
    )
    assert report.probe("chat").status == "pass"
    streaming = report.probe("streaming_usage")
    assert streaming.status == "pass", streaming.summary  # the good chunk, usage and [DONE] follow
    assert streaming.data["usage"] == {"prompt_tokens": 3, "completion_tokens": 1}


class _SilentGenerationHandler(_Handler):
    """FakeSilentGenerationServer: /health and /v1/models answer; every POST is read and never answered
    (an engine stuck or saturated)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        threading.Event().wait(30)


@pytest.fixture()
def fake_silent_generation_server() -> Iterator[str]:
    yield from _serve(type("FakeSilentGenerationServer", (_SilentGenerationHandler,), {}))


@pytest.mark.parametrize("client", ["claude-code", "codex", None])
def test_a_generation_that_gets_no_reply_ends_the_check_at_once(
    client: str | None, fake_silent_generation_server: str, tmp_path: Path
) -> None:
    """For a client whose needs do not include chat, each of 14 probes had waited its whole --timeout
    (15 minutes with the defaults); after the first short generation without a reply only the client's
    next own probe is asked (and fails the same way)."""
    import time

    t0 = time.monotonic()
    report = run_checks(
        fake_silent_generation_server, client=client, model=None, api_key=None, settings=_settings(tmp_path),
        timeout=1.5,
    )  # fmt: skip
    assert time.monotonic() - t0 < 15  # 5 s idle; 14 probes x 1.5 s (the bug) would be 21 s
    assert not report.ready
    chat = report.probe("chat")
    assert chat.status in {"fail", "inconclusive"} and chat.data.get("timed_out")
    later = [p for p in report.probes if p.id not in {"health", "api_key", "models", "chat"}]
    waited = [p for p in later if p.status != "skipped"]  # at most the client's first own probe, failed
    assert len(waited) <= 1 and all(p.required and p.status == "fail" for p in waited), waited


def test_a_request_the_deadline_cuts_short_names_the_deadline(
    fake_silent_generation_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check --deadline 3` on a server that never answers a generation: the report had blamed a
    120 s --timeout that did not run out ("raise --timeout"), and said READY."""
    from llmdeck.checks.table import print_report
    from llmdeck.cli.output import out_console

    report = run_checks(
        fake_silent_generation_server, client=None, model=None, api_key=None, settings=_settings(tmp_path),
        timeout=120, deadline_s=3,
    )  # fmt: skip
    chat = report.probe("chat")
    assert chat.status == "inconclusive" and "within its 3 s deadline" in chat.summary
    assert "120 s" not in chat.summary and not report.ready
    assert report.incomplete is not None and "3 s deadline" in report.incomplete
    print_report(report, out_console())
    out = capsys.readouterr().out
    assert "NOT CHECKED for a plain OpenAI client" in out and "READY for" not in out.replace("NOT ", "")


class _BusyHandler(_Handler):
    """FakeBusyProxy: a proxy answering 429 with an HTML page and Retry-After to everything."""

    def do_GET(self) -> None:
        self._html(429)

    def do_POST(self) -> None:
        self._html(429)

    def _html(self, status: int) -> None:
        page = b"<html><body><h1>429 Too Many Requests</h1></body></html>"
        self.send_response(status)
        self.send_header("Retry-After", "3600")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)


def test_a_rate_limiting_proxy_is_named_as_such(tmp_path: Path) -> None:
    """HTTP 429 had been "still loading, or its engine died" (check), "not an OpenAI-compatible server"
    (status) and an HTML dump with "Check the URL" (bench)."""
    from llmdeck.client.errors import http_status_error
    from llmdeck.runtime.urlstatus import url_status

    for url in _serve(type("FakeBusyProxy", (_BusyHandler,), {})):
        report = run_checks(
            url, client=None, model=None, api_key=None, settings=_settings(tmp_path), timeout=5
        )
        assert "it is rate-limiting" in report.probe("health").summary
        assert "rate-limiting" in url_status(url, limit=5).detail
    err = http_status_error("http://h:1/v1/models", 429, "<html>429 Too Many Requests</html>")
    assert "overloaded or rate-limiting" in err.message and "<html>" not in err.message


class _MessagesBrokenHandler(_Handler):
    """FakeBadGatewayMessages: chat works; /v1/messages answers 500 with a proxy's "502 Bad Gateway" page."""

    def do_POST(self) -> None:
        if self.path.startswith("/v1/messages"):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._json(500, {"error": {"message": "<html><h1>502 Bad Gateway</h1></html>"}})
            return
        super().do_POST()


def test_a_server_error_on_the_clients_request_is_not_blamed_on_its_tools(tmp_path: Path) -> None:
    """A 5xx had been "the tool schemas or a parameter it sends are not accepted"."""
    for url in _serve(type("FakeBadGatewayMessages", (_MessagesBrokenHandler,), {})):
        report = run_checks(
            url, client="claude-code", model=None, api_key=None, settings=_settings(tmp_path), timeout=5
        )
    probe = report.probe("client_request")
    assert probe.status == "fail" and "failed on" in probe.summary and "tool schemas" not in probe.summary


@pytest.mark.parametrize("count", [-100, 10**40, "lots", 2.5, True])
def test_a_usage_count_that_is_no_token_count_fails_chat(count: Any) -> None:
    """check had passed chat with "-100 tokens" and a stream with "usage inf completion tokens"."""
    from llmdeck.checks.probes_basic import bad_count

    assert bad_count({"completion_tokens": count}) is not None
    assert bad_count({"completion_tokens": 7}) is None and bad_count({}) is None and bad_count("x") is None


class _WeirdUsageHandler(_Handler):
    """FakeWeirdUsageServer: a chat reply whose usage says -100 completion tokens."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        msg = {"role": "assistant", "content": "hi"}
        usage = {"prompt_tokens": 3, "completion_tokens": -100}
        self._json(200, {"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}], "usage": usage})


def test_a_negative_usage_count_is_a_failed_chat(tmp_path: Path) -> None:
    for url in _serve(type("FakeWeirdUsageServer", (_WeirdUsageHandler,), {})):
        report = run_checks(
            url, client=None, model=None, api_key=None, settings=_settings(tmp_path), timeout=5
        )
    chat = report.probe("chat")
    assert chat.status == "fail" and "usage.completion_tokens is '-100', not a token count" in chat.summary
    assert not report.ready
