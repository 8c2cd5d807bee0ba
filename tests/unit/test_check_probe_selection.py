"""`llmdeck check --probe ID`: only the probes asked for run (with health, api_key and models), the
client's own among them; an id that is no probe is bad input before any request.

Against FakeChatServer, a tiny fake HTTP server (defined here) that answers /health, /v1/models and
every chat request with "hi"; the real engine's run is in tests/integration/test_check_integration.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cli_helpers import run_cli
from http_fakes import JsonHandler
from llmdeck.checks import run_checks
from llmdeck.settings import Settings

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "root": "/m", "max_model_len": 2048}]}


class FakeChatServer(JsonHandler):
    """Answers every chat request with "hi" (streamed or not); counts the requests it gets."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.requests.append(f"GET {self.path}")
        if self.path == "/health":
            self._json(200, {})
        elif self.path == "/v1/models":
            self._json(200, MODELS)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        self.requests.append(f"POST {self.path}")
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path != "/v1/chat/completions":
            self._json(404, {"detail": "Not Found"})
        elif body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
            usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
            events = [json.dumps(chunk), json.dumps(usage), "[DONE]"]
            self.wfile.write("".join(f"data: {e}\n\n" for e in events).encode())
            self.close_connection = True
        else:
            msg = {"role": "assistant", "content": "hi"}
            usage = {"prompt_tokens": 3, "completion_tokens": 1}
            choice = {"index": 0, "message": msg, "finish_reason": "stop"}
            self._json(200, {"choices": [choice], "usage": usage})


@pytest.fixture()
def fake_chat_server() -> Iterator[tuple[str, list[str]]]:
    handler: Any = type("FakeChatServer", (FakeChatServer,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    finally:
        server.shutdown()
        server.server_close()


def test_only_the_probes_asked_for_run_the_clients_own_among_them(
    fake_chat_server: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, _ = fake_chat_server
    report = run_checks(
        url,
        client="opencode",
        model=None,
        api_key=None,
        settings=Settings(state_dir=tmp_path),
        probes=["client_context", "chat", "chat"],
    )
    assert [p.id for p in report.probes] == ["health", "api_key", "models", "chat", "client_context"]
    assert report.only == ["client_context", "chat"]
    assert report.probe("chat").status == "pass"
    # opencode's base prompt does not fit 2,048 tokens: the one client probe asked for says so
    assert report.probe("client_context").status == "fail" and not report.ready


def test_the_cli_runs_one_probe_and_its_verdict_says_so(
    fake_chat_server: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = fake_chat_server
    code, out, err = run_cli(["check", url, "--probe", "chat"], capsys)
    assert code == 0, err
    assert "READY for a plain OpenAI client (only chat asked for)." in " ".join(out.split())
    code, out, err = run_cli(["check", url, "--probe", "chat", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["only"] == ["chat"] and report["ready"] is True
    assert [p["id"] for p in report["probes"]] == ["health", "api_key", "models", "chat"]


@pytest.mark.parametrize(
    ("client", "bad", "offered", "not_offered"),
    [
        ("opencode", "tool-auto", "client_context", "messages_stream"),
        ("claude-code", "client_nope", "messages_stream", "responses_stream"),
        (None, "client_context", "tool_auto", "client_context"),
    ],
)
def test_an_id_that_is_no_probe_is_bad_input_before_any_request(
    fake_chat_server: tuple[str, list[str]],
    capsys: pytest.CaptureFixture[str],
    client: str | None,
    bad: str,
    offered: str,
    not_offered: str,
) -> None:
    url, requests = fake_chat_server
    args = ["check", url, "--probe", "chat", "--probe", bad] + (["--client", client] if client else [])
    code, out, err = run_cli(args, capsys)
    text = " ".join(err.split())
    assert code == 2 and out == ""
    assert f"check has no probe '{bad}'" in text and "Pick from:" in text
    hint = text.split("Pick from:", 1)[1]
    assert offered in hint and not_offered not in hint.split("(")[0]
    assert "Traceback" not in err and requests == []


def test_a_failed_check_ends_with_the_command_that_checks_only_what_failed_again(
    fake_chat_server: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = fake_chat_server
    code, _, err = run_cli(["check", url + "/v1", "-c", "opencode", "-m", "m"], capsys)
    text = " ".join(err.split())
    assert code == 1 and "client_context failed" in text
    again = f"`llmdeck check {url}/v1 --client opencode --model m --probe client_context`."
    assert text.endswith("Then check only what failed again: " + again), text[-300:]


def test_when_health_fails_the_command_is_the_whole_check_again(capsys: pytest.CaptureFixture[str]) -> None:
    """The probes after a failed health are skipped, not passed: checking health alone would say READY.
    (The `--probe api_key` it had printed was also mangled by the secrets' redaction.)"""
    handler: Any = type("FakeUnhealthyServer", (FakeChatServer,), {"requests": [], "do_GET": _not_found})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        code, _, err = run_cli(["check", url, "-c", "opencode"], capsys)
    finally:
        server.shutdown()
        server.server_close()
    text = " ".join(err.split())
    assert code == 1 and "health" in text and "--probe" not in text and "<redacted>" not in text
    assert text.endswith(f"Then check again: `llmdeck check {url} --client opencode`."), text[-300:]


def _not_found(self: FakeChatServer) -> None:
    self._json(404, {"detail": "Not Found"})
