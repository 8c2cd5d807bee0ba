"""Warm a fresh server up with the request shapes users will send, and say how slow the first ones were.

A fresh vLLM compiles Triton kernels for shapes it meets the first time (seed 004; on the H200 the
first requests of a bench had P99 TTFT 5.7 s against a median of 0.53 s). :func:`warmup` sends
short, medium and long prompts (up to a cap within ``max_model_len``), streamed and not, and a
tool-call-shaped one, then repeats a few as "measured" steady-state requests and reports first vs
steady-state TTFT. Every prompt starts with a fresh nonce so prefix caching cannot flatter the repeats.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.util.http import IDENTITY, BodyTooLarge, aread_capped, capped_alines
from llmdeck.util.jsonsafe import loads as _json_loads

WARMUP_SCHEMA_VERSION = 1
DEFAULT_LENGTHS = (64, 512, 2048, 8192, 32768)
MAX_WARMUP_PROMPT = 32768

# Common English words; with Qwen/Llama tokenizers " word" is one token, so N words ~ N tokens.
_TEXT = (
    "the system reads each file and checks every function before it writes the new test for the "
    "module while the server keeps the cache warm so that later requests return quickly and the "
    "agent can plan its next step with the output of the previous tool call in mind"
)
_WORDS = _TEXT.split(" ")

_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository and return its text.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Path relative to the repo root"}},
            "required": ["path"],
        },
    },
}

Phase = Literal["first", "steady"]


class WarmupRequest(BaseModel):
    """One warm-up request and how it went."""

    label: str
    phase: Phase
    stream: bool
    target_tokens: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = Field(
        None, description="Seconds to the first generated chunk (stream) or response"
    )
    e2e_s: float | None = None
    ok: bool = True
    skipped: bool = Field(False, description="Not applicable on this server (e.g. no auto tool choice)")
    error: str | None = None
    note: str | None = None


class WarmupReport(BaseModel):
    """What warming up found: first vs steady-state TTFT."""

    schema_version: int = WARMUP_SCHEMA_VERSION
    llmdeck_version: str = ""
    server_version: str | None = None
    base_url: str
    model: str
    max_model_len: int
    lengths: list[int]
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    duration_s: float = 0.0
    requests: list[WarmupRequest] = Field(default_factory=list)
    first_ttft_s: float | None = Field(None, description="TTFT of the very first request")
    first_max_ttft_s: float | None = Field(None, description="Slowest TTFT among the first-time shapes")
    steady_ttft_median_s: float | None = Field(None, description="Median TTFT of the measured repeats")
    slowdown: float | None = Field(
        None, description="First-time TTFT / steady TTFT of the same shape (the worst shape)"
    )
    per_shape: dict[str, dict[str, float]] = Field(default_factory=dict)

    @property
    def failed(self) -> list[WarmupRequest]:
        return [r for r in self.requests if not r.ok and not r.skipped]

    def summary(self) -> str:
        if self.slowdown is None or self.steady_ttft_median_s is None:
            ok = sum(1 for r in self.requests if r.ok)
            return (
                f"Warm-up sent {len(self.requests)} requests ({ok} ok); "
                "not enough data for a first-vs-steady ratio."
            )
        label, worst = max(self.per_shape.items(), key=lambda kv: kv[1].get("ratio", 0.0))
        if self.slowdown < 1.1:
            return (
                f"First requests were no slower than warm ones (worst {label}: {worst['ratio']:.2f}x); "
                f"steady-state median TTFT {self.steady_ttft_median_s:.2f} s."
            )
        return (
            f"First requests were up to {self.slowdown:.1f}x slower than warm ones "
            f"({label}: TTFT {worst['first_ttft_s']:.2f} s first vs {worst['steady_ttft_s']:.2f} s warm); "
            f"steady-state median TTFT {self.steady_ttft_median_s:.2f} s over "
            f"{sum(1 for r in self.requests if r.phase == 'steady' and r.ok)} measured requests."
        )


def default_lengths(max_model_len: int, max_tokens: int) -> list[int]:
    """Prompt lengths to cover: the defaults that fit, plus the cap itself."""
    cap = min(max_model_len - max_tokens - 64, MAX_WARMUP_PROMPT)
    if cap <= 16:
        return [max(8, cap)]
    lengths = [n for n in DEFAULT_LENGTHS if n <= cap]
    if not lengths or cap > lengths[-1] * 1.25:
        lengths.append(cap)
    return lengths


def make_prompt(n_tokens: int, nonce: str) -> str:
    """About ``n_tokens`` tokens of plain text, starting with a nonce (defeats prefix caching)."""
    n_words = max(1, int(n_tokens * 0.85) - 12)
    words = [_WORDS[i % len(_WORDS)] for i in range(n_words)]
    return f"Request {nonce}. Summarise the following notes in one sentence.\n" + " ".join(words)


def _delta_has_output(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta") or {}
    return bool(
        delta.get("content")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
        or delta.get("tool_calls")
    )


async def _one(
    client: Any,
    *,
    model: str,
    label: str,
    phase: Phase,
    n_tokens: int,
    stream: bool,
    max_tokens: int,
    tools: bool = False,
) -> WarmupRequest:
    import asyncio

    import httpx

    req = WarmupRequest(label=label, phase=phase, stream=stream, target_tokens=n_tokens)
    body = _body(model, n_tokens, max_tokens, stream=stream, tools=tools)
    start = time.perf_counter()
    try:  # bounded as a whole (a stream that never ends), capped, and shaped like an OpenAI reply
        async with asyncio.timeout(client.timeout.read):
            failed = await (_send_streamed if stream else _send_plain)(client, body, req, start)
    except (httpx.HTTPError, ValueError, BodyTooLarge, TimeoutError) as exc:
        req.ok = False
        from llmdeck.client.httpmap import http_failure_words  # words, no Python class name

        late = "no whole reply in time"  # asyncio's TimeoutError: the request as a whole ran past the limit
        req.error = late if isinstance(exc, TimeoutError) else http_failure_words(exc, late)
        return req
    if failed is not None:
        return failed
    req.e2e_s = time.perf_counter() - start
    if req.ttft_s is None:
        req.ttft_s = req.e2e_s
        req.note = "no generated chunk seen; TTFT = end-to-end"
    return req


def _body(model: str, n_tokens: int, max_tokens: int, *, stream: bool, tools: bool) -> dict[str, Any]:
    """A chat request of about ``n_tokens`` prompt tokens, unique (a nonce) so no prefix cache hits."""
    nonce = secrets.token_hex(4)
    content = make_prompt(n_tokens, nonce)
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    if tools:
        body["messages"][0]["content"] = (
            f"Request {nonce}. Use the read_file tool to open src/app.py and tell me what it does."
        )
        body["tools"] = [_TOOL]
        body["tool_choice"] = "auto"
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


async def _send_streamed(
    client: Any, body: dict[str, Any], req: WarmupRequest, start: float
) -> WarmupRequest | None:
    """Stream the request, noting TTFT and usage in ``req``; the failed request on an HTTP error."""
    from llmdeck.client.replies import head_of_body

    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        if resp.status_code >= 400:
            return _http_error(req, resp.status_code, await head_of_body(resp))
        async for raw in capped_alines(resp, str(resp.request.url)):
            line = raw.decode("utf-8", "replace")
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = _reply_object(data)
            choices = chunk.get("choices") or []
            if req.ttft_s is None and any(isinstance(c, dict) and _delta_has_output(c) for c in choices):
                req.ttft_s = time.perf_counter() - start
            if chunk.get("usage"):
                _note_usage(req, chunk["usage"])
    return None


def _reply_object(text: str | bytes) -> dict[str, Any]:
    """A reply or stream event: a JSON object, else ValueError (a list, null, a page, bad UTF-8)."""
    obj = _json_loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"the server answered {type(obj).__name__}, not a JSON object")
    return obj


def _note_usage(req: WarmupRequest, usage: Any) -> None:
    """``usage``'s token counts into ``req``; ValueError unless each is a whole number of tokens."""
    from llmdeck.client.replies import usage_counts

    req.prompt_tokens, req.completion_tokens = usage_counts(usage)


async def _send_plain(
    client: Any, body: dict[str, Any], req: WarmupRequest, start: float
) -> WarmupRequest | None:
    """One non-streamed request; the whole response counts as the first token."""
    from llmdeck.client.replies import head_of_body

    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        if resp.status_code >= 400:
            return _http_error(req, resp.status_code, await head_of_body(resp))
        reply = _reply_object(await aread_capped(resp, str(resp.request.url)))
    req.ttft_s = time.perf_counter() - start  # no stream: the whole response is the first token
    _note_usage(req, reply.get("usage") or {})
    return None


def _http_error(req: WarmupRequest, status: int, text: str) -> WarmupRequest:
    req.ok = False
    try:
        msg = _json_loads(text).get("error", {})
        msg = msg.get("message", text) if isinstance(msg, dict) else str(msg)
    except (ValueError, AttributeError):
        msg = text
    req.error = f"HTTP {status}: {str(msg)[:300]}"
    return req


def _too_long(req: WarmupRequest) -> bool:
    return (
        bool(req.error)
        and req.error is not None
        and ("maximum context length" in req.error or "max_model_len" in req.error or "too long" in req.error)
    )


async def warmup(
    base_url: str,
    model: str,
    *,
    max_model_len: int,
    api_key: str | None = None,
    lengths: list[int] | None = None,
    repeats: int = 3,
    max_tokens: int = 16,
    timeout_s: float = 600.0,
) -> WarmupReport:
    """Warm the server up and measure how much slower the first requests were.

    First pass: one request per prompt length (streamed), a non-streamed one, and a
    tool-call-shaped one (``tools`` + ``tool_choice: auto``; servers without auto tool choice
    answer 400, which is recorded, and the shape is sent without ``tools``). Second pass:
    ``repeats`` measured repeats of each length. Requests run one at a time.
    """
    import httpx

    from llmdeck import __version__

    lengths = sorted(set(lengths or default_lengths(max_model_len, max_tokens)))
    cap = max_model_len - max_tokens - 16
    lengths = [n for n in lengths if n <= cap] or [max(8, cap)]
    report = WarmupReport(
        llmdeck_version=__version__,
        base_url=base_url,
        model=model,
        max_model_len=max_model_len,
        lengths=lengths,
    )
    headers = {**IDENTITY, **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s) as client:
        version = await _server_version(client)
        if version is not None:
            report.server_version = version
        send = _sender(client, report, model=model, max_tokens=max_tokens)
        await _passes(send, report, lengths, repeats)
    report.duration_s = round(time.perf_counter() - t0, 3)
    _summarise(report)
    return report


async def _server_version(client: Any) -> Any:
    """``GET /version``'s version, or None (no such endpoint, an error)."""
    import asyncio

    import httpx

    try:
        async with asyncio.timeout(5.0), client.stream("GET", "/version", timeout=5.0) as v:
            if v.status_code == 200:
                return _reply_object(await aread_capped(v, str(v.request.url))).get("version")
    except (httpx.HTTPError, ValueError, BodyTooLarge, TimeoutError):
        pass
    return None


_Send = Callable[..., Awaitable[None]]


def _sender(client: Any, report: WarmupReport, *, model: str, max_tokens: int) -> _Send:
    """``send(label, phase, n, stream=, tools=)``: one request into ``report``, retried at half the
    length when the first try was over max_model_len."""

    async def send(label: str, phase: Phase, n: int, *, stream: bool = True, tools: bool = False) -> None:
        kw: dict[str, Any] = {"model": model, "label": label, "phase": phase, "stream": stream}
        kw.update(max_tokens=max_tokens, tools=tools)
        req = await _one(client, n_tokens=n, **kw)
        if _too_long(req) and n > 16:
            req = await _one(client, n_tokens=n // 2, **kw)
            req.note = f"retried at {n // 2} tokens: the first try was over max_model_len"
        report.requests.append(req)

    return send


async def _passes(send: _Send, report: WarmupReport, lengths: list[int], repeats: int) -> None:
    """The first pass (every shape once), then ``repeats`` steady passes of each length."""
    for n in lengths:
        await send(f"prompt {n}", "first", n)
    await send(f"prompt {lengths[0]} (no stream)", "first", lengths[0], stream=False)
    await send("tool call", "first", lengths[0], tools=True)
    tool_req = report.requests[-1]
    if not tool_req.ok and tool_req.error and tool_req.error.startswith("HTTP 400"):
        tool_req.skipped = True
        tool_req.note = "server has no auto tool choice (--enable-auto-tool-choice); sent without tools"
        await send("tool-shaped prompt (no tools)", "first", lengths[0])
    for _ in range(repeats):
        for n in lengths:
            await send(f"prompt {n}", "steady", n)


def _summarise(report: WarmupReport) -> None:
    ok = [r for r in report.requests if r.ok and r.ttft_s is not None]
    first = [r for r in ok if r.phase == "first"]
    steady = [r for r in ok if r.phase == "steady"]
    if report.requests and report.requests[0].ok:
        report.first_ttft_s = report.requests[0].ttft_s
    if first:
        report.first_max_ttft_s = max(r.ttft_s for r in first if r.ttft_s is not None)
    if steady:
        report.steady_ttft_median_s = statistics.median(r.ttft_s for r in steady if r.ttft_s is not None)
    ratios: list[float] = []
    for label in dict.fromkeys(r.label for r in steady):
        firsts = [r.ttft_s for r in first if r.label == label and r.ttft_s is not None]
        warm = [r.ttft_s for r in steady if r.label == label and r.ttft_s is not None]
        if not firsts or not warm:
            continue
        med = statistics.median(warm)
        ratio = firsts[0] / med if med > 0 else 0.0
        report.per_shape[label] = {"first_ttft_s": firsts[0], "steady_ttft_s": med, "ratio": ratio}
        ratios.append(ratio)
    if ratios:
        report.slowdown = max(ratios)
