"""Ollama's native API through the gateway to the real CPU vLLM (cpu_server: tiny Qwen3, the qwen3 reasoning
parser, hermes tools), driven by Ollama's own Python client (ollama 0.6.3): what a client written for
Ollama sees when its host is the gateway. The same request through OpenAI's API is the reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import pytest

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore

pytestmark = pytest.mark.integration
SAY = [{"role": "user", "content": "Say hi."}]
GREEDY = {"temperature": 0, "num_predict": 8}


@pytest.fixture(scope="module")
def gw(cpu_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("gateway-ollama")
    key = KeyStore(tmp / "keys.json").create("ci", models=["qwen3:8b"])
    text = f"""
routes:
  - model: qwen3:8b
    backends: [{cpu_server.base_url}]
    defaults: {{chat_template_kwargs: {{enable_thinking: false}}}}
keys_file: keys.json
timeouts: {{connect_s: 2, first_byte_s: 60, response_s: 300}}
"""
    loaded = parse_config(text, source=tmp / "gateway.yaml", settings=cpu_server.settings)
    with UvicornThread(build_app(loaded)) as server:
        client = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
        yield {"url": server.url, "key": key, "client": client, "direct": cpu_server.base_url}


def _openai(gw: dict[str, Any], path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The same request through the gateway's OpenAI API: the reference."""
    headers = {"Authorization": f"Bearer {gw['key']}"}
    r = httpx.post(f"{gw['url']}/v1/{path}", json=body, headers=headers, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_chat_streamed_and_whole_say_what_openais_api_says(gw: dict[str, Any]) -> None:
    client: ollama.Client = gw["client"]
    ref = _openai(gw, "chat/completions", {"model": "qwen3:8b", "messages": SAY, "max_tokens": 8,
                                           "temperature": 0})  # fmt: skip
    text = ref["choices"][0]["message"]["content"]
    whole = client.chat(model="qwen3:8b", messages=SAY, options=GREEDY, stream=False)
    assert whole.message.content == text and whole.done and whole.done_reason == "length"
    assert whole.eval_count == 8 and whole.prompt_eval_count == ref["usage"]["prompt_tokens"]
    parts = list(client.chat(model="Qwen3:8B", messages=SAY, options=GREEDY, stream=True))
    assert "".join(p.message.content or "" for p in parts) == text and len(parts) > 2
    last = parts[-1]
    assert last.done and last.eval_count == 8 and last.eval_duration and last.prompt_eval_duration


def test_thinking_raw_generate_and_a_tool_turn(gw: dict[str, Any]) -> None:
    client: ollama.Client = gw["client"]
    parts = list(client.chat(model="qwen3:8b", messages=SAY, options=GREEDY, think=True, stream=True))
    assert "".join(p.message.thinking or "" for p in parts)  # the reasoning parser's output, as thinking
    ref = _openai(gw, "completions", {"model": "qwen3:8b", "prompt": "Once upon", "max_tokens": 4,
                                      "temperature": 0})  # fmt: skip
    options = {"temperature": 0, "num_predict": 4}
    raw = client.generate(model="qwen3:8b", prompt="Once upon", raw=True, options=options)
    assert raw.response == ref["choices"][0]["text"] and raw.eval_count == 4
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]  # fmt: skip
    turn = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                          "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]  # fmt: skip
    reply = client.chat(model="qwen3:8b", messages=turn, tools=tools, options=GREEDY)
    assert reply.done and reply.prompt_eval_count and reply.prompt_eval_count > 100  # the tools' prompt


def test_models_and_vllms_own_refusal(gw: dict[str, Any], cpu_server: Any) -> None:
    client: ollama.Client = gw["client"]
    assert [m.model for m in client.list().models] == ["qwen3:8b"]
    max_len = httpx.get(f"{gw['direct']}/v1/models").json()["data"][0]["max_model_len"]
    assert client.show("qwen3:8b").modelinfo == {"general.architecture": "llmdeck",
                                                  "llmdeck.context_length": max_len}  # fmt: skip
    assert [m.context_length for m in client.ps().models] == [max_len]
    long = [{"role": "user", "content": "hi " * (max_len + 100)}]
    with pytest.raises(ollama.ResponseError) as exc:
        client.chat(model="qwen3:8b", messages=long, options=GREEDY)
    assert exc.value.status_code == 400 and str(max_len) in exc.value.error  # vLLM's words, Ollama's shape
    with pytest.raises(ollama.ResponseError) as exc:
        ollama.Client(host=gw["url"]).list()
    assert exc.value.status_code == 401
