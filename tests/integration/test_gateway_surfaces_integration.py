"""Anthropic Messages and OpenAI Responses through the gateway to the real CPU vLLM (cpu_server: tiny Qwen3,
the qwen3 reasoning parser, hermes tools), with aliases and a key, as Claude Code and Codex send them (#34).

Run under the engine lock: flock /tmp/llmdeck-engine.lock pytest -q -m integration <this file>
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore
from repo_paths import TEST_FIXTURES

pytestmark = pytest.mark.integration
MSG = [{"role": "user", "content": "Say hi."}]
TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def gw(cpu_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("gateway-surfaces")
    key = KeyStore(tmp / "keys.json").create("ci", models=["claude", "claude-folded", "codex"])
    text = f"""
routes:
  - model: claude
    backends: [{cpu_server.base_url}]
    defaults: {{max_tokens: 8, chat_template_kwargs: {{enable_thinking: false}}}}
  - model: claude-folded
    backends: [{cpu_server.base_url}]
    defaults: {{max_tokens: 8, chat_template_kwargs: {{enable_thinking: false}}}}
    messages: {{fold_system: true}}
  - model: codex
    backends: [{cpu_server.name}]
    defaults: {{max_tokens: 8}}
keys_file: keys.json
timeouts: {{connect_s: 2, first_byte_s: 60, response_s: 300}}
"""
    loaded = parse_config(text, source=tmp / "gateway.yaml", settings=cpu_server.settings)
    with UvicornThread(build_app(loaded)) as server:
        yield {"url": server.url, "key": key}


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines and "data" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_messages_count_tokens_and_keys(gw: dict[str, Any]) -> None:
    url, xkey = gw["url"], {"x-api-key": gw["key"], "anthropic-version": "2023-06-01"}
    reply = httpx.post(
        f"{url}/v1/messages", json={"model": "claude", "messages": MSG}, headers=xkey, timeout=120
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["type"] == "message" and body["usage"]["output_tokens"] == 8  # max_tokens from the route
    bearer = {"Authorization": f"Bearer {gw['key']}"}
    stream = {"model": "claude", "messages": MSG, "max_tokens": 6, "stream": True}
    with httpx.stream("POST", f"{url}/v1/messages?beta=true", json=stream, headers=bearer, timeout=120) as r:
        assert r.status_code == 200
        events = _events(r.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "message_delta" in kinds
    count = httpx.post(
        f"{url}/v1/messages/count_tokens", json={"model": "claude", "messages": MSG}, headers=xkey
    )
    assert count.status_code == 200 and count.json()["input_tokens"] > 0
    wrong = httpx.post(
        f"{url}/v1/messages",
        json={"model": "claude", "messages": MSG},
        headers={"x-api-key": "sk-llmdeck-wrong"},
    )
    assert wrong.status_code == 401
    assert wrong.json()["type"] == "error" and wrong.json()["error"]["type"] == "authentication_error"
    assert httpx.head(f"{url}/").status_code == 200


def test_claude_codes_tool_search_turn(gw: dict[str, Any]) -> None:
    """Claude Code 2.1.332's request after its ToolSearch tool ran, as it sent it (trimmed, see the
    fixture's ``source``): deferred tools (``defer_loading: true``), a ``tool_result`` of
    ``tool_reference`` blocks, ``thinking.display``, a mid-conversation system message. vLLM takes it
    as relayed and with the system message folded; ``count_tokens`` counts it."""
    fixture = TEST_FIXTURES / "clients" / "claude-code-2.1.332-tool-search.json"
    sent = json.loads(fixture.read_text())["body"]
    key = {"x-api-key": gw["key"], "anthropic-version": "2023-06-01"}
    for alias in ("claude", "claude-folded"):
        body = {**sent, "model": alias, "max_tokens": 8}  # its 32000: the CPU engine's pace
        url = f"{gw['url']}/v1/messages?beta=true"
        with httpx.stream("POST", url, json=body, headers=key, timeout=120) as r:
            assert r.status_code == 200, r.read()
            kinds = [k for k, _ in _events(r.read().decode())]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    counted = {k: v for k, v in sent.items() if k in ("system", "messages", "tools", "thinking")}
    count = httpx.post(
        f"{gw['url']}/v1/messages/count_tokens", json={**counted, "model": "claude-folded"}, headers=key
    )
    assert count.status_code == 200 and count.json()["input_tokens"] > 0, count.text


def test_responses_stream_and_function_call_turns(gw: dict[str, Any]) -> None:
    url, key = gw["url"], {"Authorization": f"Bearer {gw['key']}"}
    body = {"model": "codex", "input": "Say hi.", "stream": True, "store": False}
    with httpx.stream("POST", f"{url}/v1/responses", json=body, headers=key, timeout=120) as r:
        assert r.status_code == 200
        events = _events(r.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    done = events[-1][1]["response"]
    assert done["id"].startswith("resp_") and done["usage"]["output_tokens"] > 0
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
    ]
    for turn in (history[:1], history):  # the whole history resent, as Codex does with store: false
        reply = httpx.post(
            f"{url}/v1/responses",
            json={"model": "codex", "input": turn, "tools": [TOOL], "store": False},
            headers=key,
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["input_tokens"] > 0


def test_metrics_count_tokens_of_both_routes(gw: dict[str, Any]) -> None:
    url, key = gw["url"], {"x-api-key": gw["key"]}
    for path, body in (
        ("/v1/messages", {"model": "claude", "messages": MSG, "stream": True}),
        ("/v1/responses", {"model": "codex", "input": "Say hi.", "stream": True, "store": False}),
    ):
        with httpx.stream("POST", url + path, json=body, headers=key, timeout=120) as r:
            assert r.status_code == 200 and r.read()
    metrics = httpx.get(f"{url}/metrics").text
    for alias in ("claude", "codex"):
        for kind in ("prompt", "completion"):
            line = f'llmdeck_gateway_tokens_total{{key="ci",kind="{kind}",route="{alias}"}}'
            assert line in metrics, metrics
        assert f'llmdeck_gateway_upstream_ttft_seconds_count{{key="ci",route="{alias}"}}' in metrics
