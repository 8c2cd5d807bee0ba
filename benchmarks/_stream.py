"""One streamed completion, read the way a load client reads it, and judged complete or not.

A stream is complete (``outcome == "ok"``) when it answered HTTP 200, ended with ``data: [DONE]``, carried
a ``finish_reason``, and, when the request asked for ``stream_options.include_usage``, its usage chunk says
``completion_tokens == max_tokens`` (with ``ignore_eos`` every request runs to ``max_tokens``). The number
of SSE events is no measure of the tokens: a real vLLM sends no usage event unless asked, and its
detokenizer merges tokens that end inside a UTF-8 character into one event, so a run of 64 tokens can
arrive in fewer than 64 events.

Outcomes: ``ok``, ``http_status`` (not 200), ``cut`` (the body ended, or the connection broke, before
``[DONE]``), ``no_finish`` (``[DONE]`` but no finish_reason), ``short`` (usage shows fewer or more tokens
than asked for, or no usage chunk although asked).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx

_FINISH = re.compile(rb'"finish_reason": ?"')
OUTCOMES = ("ok", "http_status", "cut", "no_finish", "short")


class StreamCheck:
    """Fed the raw body chunks; counts events and finds [DONE], a finish_reason and the usage."""

    def __init__(self) -> None:
        self.pending = b""
        self.events = 0  # data events, [DONE] and the usage-only chunk excluded
        self.done = False
        self.finish = False
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: bytes) -> int:
        """Returns the number of complete events in this chunk (for the first-token time)."""
        parts = (self.pending + chunk).split(b"\n\n")
        self.pending = parts.pop()
        n = 0
        for ev in parts:
            if not ev.startswith(b"data: "):
                continue
            n += 1
            if ev.startswith(b"data: [DONE]"):
                self.done = True
                continue
            if not self.finish and _FINISH.search(ev):
                self.finish = True
            if b'"completion_tokens"' in ev:
                try:
                    usage = json.loads(ev[6:]).get("usage")
                except ValueError:
                    usage = None
                if isinstance(usage, dict):
                    self.usage = usage
                    if b'"choices":[]' in ev or b'"choices": []' in ev:
                        continue
            self.events += 1
        return n

    def outcome(self, max_tokens: int | None) -> str:
        if not self.done:
            return "cut"
        if not self.finish:
            return "no_finish"
        if max_tokens is not None and (self.usage or {}).get("completion_tokens") != max_tokens:
            return "short"
        return "ok"


async def one(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    *,
    inflight: list[int] | None = None,
) -> dict[str, Any]:
    """Send one streamed request; ``ok`` is True only for a complete stream (see the module's doc).

    ``inflight`` (a one-element counter) is raised while the request is on its way, for a sampler.
    """
    asked_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    want = body.get("max_tokens") if asked_usage and body.get("ignore_eos") else None
    t0 = time.perf_counter()
    ttft = None
    check = StreamCheck()
    if inflight is not None:
        inflight[0] += 1
    try:
        async with client.stream("POST", url, json=body, headers=headers) as r:
            if r.status_code != 200:
                await r.aread()
                return {"ok": False, "outcome": "http_status", "status": r.status_code}
            async for chunk in r.aiter_raw():
                if check.feed(chunk) and ttft is None:
                    ttft = time.perf_counter() - t0
    except httpx.HTTPError as exc:
        return {"ok": False, "outcome": "cut", "error": type(exc).__name__, "events": check.events}
    finally:
        if inflight is not None:
            inflight[0] -= 1
    outcome = check.outcome(want)
    tokens = check.usage.get("completion_tokens") if check.usage else None
    return {
        "ok": outcome == "ok",
        "outcome": outcome,
        "ttft": ttft,
        "events": check.events,
        "completion_tokens": tokens,
        "total": time.perf_counter() - t0,
    }
