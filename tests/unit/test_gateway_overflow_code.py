"""A prompt over the backend's context, on an OpenAI API, reaches the client with OpenAI's error code for
it, ``context_length_exceeded``. vLLM 0.32 answers it with its own words and ``code: 400`` (the bodies
here are its real ones, tiny CPU Qwen3 at max-model-len 16384); Codex 0.171.0 printed that JSON, and
with the code says "Codex ran out of room in the model's context window" (evidence/gateway)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_fakes import UvicornThread, fake_raw_reply
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.surfaces import with_overflow_code
from llmdeck.settings import Settings
from repo_paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gateway"
RESPONSES_400 = (FIXTURES / "vllm-0.32-responses-400-context.json").read_bytes()
CHAT_400 = (FIXTURES / "vllm-0.32-chat-400-context.json").read_bytes()
FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 2, response_s: 2, idle_s: 3}\n"
    "health: {interval_s: 60, timeout_s: 0.5}\n"
)


def reply(status: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


def through_gateway(tmp_path: Path, raw: bytes, path: str, body: dict[str, Any]) -> httpx.Response:
    with fake_raw_reply(raw) as url:
        text = f"routes:\n  - model: a\n    backends: ['{url}']\n{FAST}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            return httpx.post(f"{gw.url}{path}", json=body, timeout=10)


@pytest.mark.parametrize(
    ("path", "real", "body"),
    [
        ("/v1/responses", RESPONSES_400, {"model": "a", "input": "x", "stream": True}),
        ("/v1/chat/completions", CHAT_400, {"model": "a", "messages": [{"role": "user", "content": "x"}]}),
    ],
)
def test_vllms_context_overflow_gets_openais_code(
    tmp_path: Path, path: str, real: bytes, body: dict[str, Any]
) -> None:
    r = through_gateway(tmp_path, reply("400 Bad Request", real), path, body)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert error["message"] == json.loads(real)["error"]["message"]  # vLLM's words, N and M kept


def test_other_400s_and_other_apis_are_relayed_as_they_came(tmp_path: Path) -> None:
    error = {"message": "max_completion_tokens=32000 cannot be greater than max_model_len=2048.", "code": 400}
    other = json.dumps({"error": error}).encode()
    r = through_gateway(
        tmp_path, reply("400 Bad Request", other), "/v1/responses", {"model": "a", "input": "x"}
    )
    assert r.status_code == 400 and r.content == other
    assert with_overflow_code("messages", 400, RESPONSES_400) is None  # Claude Code reads vLLM's words
    assert with_overflow_code("responses", 500, RESPONSES_400) is None
    assert with_overflow_code("responses", 400, b"not json") is None
    assert with_overflow_code("responses", 400, b'{"error": "a string"}') is None


DEEP = b"[" * 5000 + b"]" * 5000  # nested past Python's JSON decoder (RecursionError, no ValueError)
CHAT = ("/v1/chat/completions", {"model": "a", "messages": [{"role": "user", "content": "x"}]})
MESSAGES = ("/v1/messages", {"model": "a", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})


@pytest.mark.parametrize(
    ("status", "api", "want"),
    [
        ("400 Bad Request", CHAT, 400),
        ("400 Bad Request", MESSAGES, 400),
        ("500 Oops", MESSAGES, 500),
        ("404 Not Found", MESSAGES, 501),
    ],
)
def test_a_backend_error_nested_too_deep_is_still_an_answer(
    tmp_path: Path, status: str, api: tuple[str, dict[str, Any]], want: int
) -> None:
    """A backend's error body nested past the decoder had made the gateway answer a bare-text "Internal
    Server Error" 500 (a RecursionError out of the reply's parse, a traceback in its log); it is now
    relayed as the backend sent it (a 404 on /v1/messages: the surface is missing, 501)."""
    r = through_gateway(tmp_path, reply(status, DEEP), *api)
    assert r.status_code == want, r.text[:300]
    assert r.content == DEEP or r.json()["error"]["message"]


def test_a_responses_stream_event_nested_too_deep_is_skipped() -> None:
    """The stream's response.created is read to end a broken stream in its terms; one nested past the
    decoder had raised RecursionError out of the relay."""
    from llmdeck.gateway.surfaces import ResponsesTrail

    trail = ResponsesTrail()
    trail.feed(b'data: {"type": "response.created", "sequence_number": 0, "response": ' + DEEP + b"}\n\n")
    assert trail.response is None and trail.last_seq == 0
