"""One streamed request on Anthropic's Messages API, OpenAI's Responses API or Ollama's /api/chat, read as a
load client reads it.

``body_for(api, model, ...)`` builds the request (``completions`` is _stream.py's own), ``one_api`` sends it:
TTFT is client send to the first token-bearing event (Messages: ``content_block_delta``; Responses: any
``response.*.delta``, reasoning included), complete (``ok``) is HTTP 200 and the API's last event
(``message_stop``; ``response.completed``). Events are the token-bearing ones. vLLM's Messages API has no
``ignore_eos``: a reply may stop before ``max_tokens`` (TTFT, the figure compared, does not depend on it).
Ollama's stream is newline-delimited JSON (a line an event): TTFT to the first line with text, complete at
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


def _events(api: str, data: bytes) -> tuple[list[bytes], bytes]:
    """The whole events (Ollama: lines) in ``data``, and the rest (an event not ended yet)."""
    parts = data.split(b"\n") if api == "ollama" else data.replace(b"\r\n", b"\n").split(b"\n\n")
    return parts[:-1], parts[-1]


def _kind(api: str, event: bytes) -> str | None:
    """ "token" (an event with text), "done" (the API's last event), or None."""
    if api == "ollama":
        part = json.loads(event) if event.strip() else {}
        return "done" if part.get("done") else "token" if part.get("message", {}).get("content") else None
    head = event.split(b"\n", 1)[0]
    if api == "messages":
        token = head == b"event: content_block_delta"
    else:
        token = head.startswith(b"event: response.") and head.endswith(b".delta")
    return "token" if token else "done" if event.startswith(_DONE[api]) else None


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
                parts, pending = _events(api, pending + chunk)
                for ev in parts:
                    kind = _kind(api, ev)
                    if kind == "token":
                        events += 1
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                    elif kind == "done":
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
