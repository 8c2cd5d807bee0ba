"""connect/launch refuse a server that refuses what Claude Code / Codex send every turn (connect/surfaces.py).

The refusal texts are the real ones: vLLM 0.22.0's answer to Claude Code 2.1.197's first request on the
H200 (evidence/device/agents-clients/claude-direct.out). The server here is a FAKE (a few lines of
http.server answering fixed replies): this is a unit test of how the answer is read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from llmdeck.connect import ServeInfo
from llmdeck.connect.surfaces import check_client_surface
from llmdeck.errors import OperationError
from repo_paths import ROOT

VLLM_022_400 = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'role'), "
        "'msg': \"Input should be 'user' or 'assistant'\", 'input': 'system'}",
        "type": "BadRequestError",
        "code": 400,
    }
}


class FakeReplies(BaseHTTPRequestHandler):
    """FAKE server: answers each path with the (status, body) in ``replies``; records what it got."""

    replies: ClassVar[dict[str, tuple[int, object]]] = {}
    seen: ClassVar[list[tuple[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"null")
        self.seen.append((self.path, body))
        status, data = self.replies.get(self.path.split("?")[0], (404, {"detail": "Not Found"}))
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture()
def fake() -> Iterator[tuple[str, type[FakeReplies]]]:
    handler = type("Handler", (FakeReplies,), {"replies": {}, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def info(url: str) -> ServeInfo:
    return ServeInfo.model_validate({"base_url": url, "model": "coder", "max_model_len": 40960})


def test_vllm_022s_refusal_of_a_second_system_message_stops_claude_code_with_the_gateway_fix(
    fake: tuple[str, type[FakeReplies]],
) -> None:
    url, handler = fake
    handler.replies["/v1/messages"] = (400, VLLM_022_400)
    with pytest.raises(OperationError) as exc:
        check_client_surface("claude-code", info(url))
    assert "takes no system role" in str(exc.value) and "no configuration was written" in str(exc.value)
    assert "fold_system: true" in (exc.value.hint or "") and "0.32" in (exc.value.hint or "")
    path, sent = handler.seen[0]
    assert path == "/v1/messages?beta=true" and isinstance(sent, dict)
    assert [m["role"] for m in sent["messages"]] == ["user", "system", "user"] and sent["max_tokens"] == 1


def test_a_template_that_refuses_later_system_messages_is_named(fake: tuple[str, type[FakeReplies]]) -> None:
    url, handler = fake
    handler.replies["/v1/messages"] = (
        400,
        {"error": {"message": "System message must be at the beginning."}},
    )
    with pytest.raises(OperationError, match="chat template refuses"):
        check_client_surface("claude-code", info(url))


@pytest.mark.parametrize("status", [200, 500, 401])
def test_anything_but_that_refusal_lets_claude_code_go_on(
    fake: tuple[str, type[FakeReplies]], status: int
) -> None:
    url, handler = fake
    handler.replies["/v1/messages"] = (status, {"content": [{"type": "text", "text": "hi"}]})
    check_client_surface("claude-code", info(url))


def test_codex_needs_v1_responses(fake: tuple[str, type[FakeReplies]]) -> None:
    url, handler = fake
    with pytest.raises(OperationError, match="no /v1/responses") as exc:
        check_client_surface("codex", info(url))
    assert "Responses API" in str(exc.value)
    handler.replies["/v1/responses"] = (200, {"output": []})
    check_client_surface("codex", info(url))
    check_client_surface("opencode", info(url))  # other clients: nothing asked


def test_a_dead_server_is_not_called_a_refusal() -> None:
    check_client_surface("claude-code", info("http://127.0.0.1:9"), timeout=2)
    check_client_surface("codex", info("http://127.0.0.1:9"), timeout=2)


def test_the_message_matches_what_vllm_022_sent_claude_code_on_the_h200() -> None:
    err = (ROOT / "evidence/device/agents-clients/claude-direct.out").read_text()
    assert "Input should be 'user' or 'assistant'" in err  # the words surfaces.ROLE_REFUSAL looks for
