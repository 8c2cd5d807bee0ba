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
