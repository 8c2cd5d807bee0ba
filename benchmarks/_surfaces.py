"""One streamed request on Anthropic's Messages API, OpenAI's Responses API or Ollama's /api/chat, read as a
load client reads it.

``body_for(api, model, ...)`` builds the request (``completions`` is _stream.py's own), ``one_api`` sends it:
TTFT is client send to the first token-bearing event (Messages: ``content_block_delta``; Responses: any
``response.*.delta``, reasoning included), complete (``ok``) is HTTP 200 and the API's last event
(``message_stop``; ``response.completed``). Events are the token-bearing ones. vLLM's Messages API has no
``ignore_eos``: a reply may stop before ``max_tokens`` (TTFT, the figure compared, does not depend on it).
Ollama's stream is newline-delimited JSON (``one_ollama``): TTFT to the first line with text, complete at
``"done": true``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

PATHS = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
    "ollama": "/api/chat",
}
_DONE = {"messages": b"event: message_stop", "responses": b"event: response.completed"}


def body_for(api: str, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    if api == "completions":
        return {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "stream": True,
            "ignore_eos": True,
            "temperature": 0,
        }
    if api == "chat":  # what the gateway sends vLLM for an Ollama chat: the direct side of --api ollama
        return {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
            "temperature": 0,
        }
    if api == "ollama":  # Ollama's /api/chat (streams unless told not to); no ignore_eos in its options
        messages = [{"role": "user", "content": prompt}]
        options = {"num_predict": max_tokens, "temperature": 0}
        return {"model": model, "messages": messages, "options": options}
    if api == "messages":
        messages = [{"role": "user", "content": prompt}]
        return {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            "temperature": 0,
        }
    return {
        "model": model,
        "input": prompt,
        "max_output_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
        "store": False,
    }


def _is_token_event(api: str, event: bytes) -> bool:
    head = event.split(b"\n", 1)[0]
    if api == "messages":
        return head == b"event: content_block_delta"
    return head.startswith(b"event: response.") and head.endswith(b".delta")


async def one_api(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str], api: str
) -> dict[str, Any]:
    t0 = time.perf_counter()
    ttft = None
    events, pending, done = 0, b"", False
    try:
        async with client.stream("POST", url, json=body, headers=headers) as r:
            if r.status_code != 200:
                await r.aread()
                return {"ok": False, "outcome": "http_status", "status": r.status_code}
            async for chunk in r.aiter_raw():
                parts = (pending + chunk).replace(b"\r\n", b"\n").split(b"\n\n")
                pending = parts.pop()
                for ev in parts:
                    if _is_token_event(api, ev):
                        events += 1
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                    elif ev.startswith(_DONE[api]):
                        done = True
    except httpx.HTTPError as exc:
        return {"ok": False, "outcome": "cut", "error": type(exc).__name__, "events": events}
    outcome = "ok" if done and ttft is not None else "cut"
    return {
        "ok": outcome == "ok",
        "outcome": outcome,
        "ttft": ttft,
        "events": events,
        "completion_tokens": None,
        "total": time.perf_counter() - t0,
    }


async def one_ollama(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    """One streamed ``/api/chat``: its lines read as Ollama's clients read them."""
    t0 = time.perf_counter()
    ttft = None
    events, pending, done = 0, b"", False
    try:
        async with client.stream("POST", url, json=body, headers=headers) as r:
            if r.status_code != 200:
                await r.aread()
                return {"ok": False, "outcome": "http_status", "status": r.status_code}
            async for chunk in r.aiter_raw():
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    part = json.loads(line)
                    if part.get("done"):
                        done = True
                    elif part.get("message", {}).get("content"):
                        events += 1
                        if ttft is None:
                            ttft = time.perf_counter() - t0
    except httpx.HTTPError as exc:
        return {"ok": False, "outcome": "cut", "error": type(exc).__name__, "events": events}
    outcome = "ok" if done and ttft is not None else "cut"
    return {"ok": outcome == "ok", "outcome": outcome, "ttft": ttft, "events": events,
            "completion_tokens": None, "total": time.perf_counter() - t0}  # fmt: skip
