"""An async OpenAI-compatible client built for measurement (httpx + a cheap SSE parser).

Usage::

    async with OpenAIClient("http://127.0.0.1:8000", api_key=None) as client:
        res = await client.stream_completion("tiny-qwen3", "Hello", max_tokens=16, ignore_eos=True)
        print(res.ttft, res.itl, res.completion_tokens)

Streams ask for ``stream_options.include_usage``; each chunk is parsed with ``json.loads``, a few
dict lookups and type checks (a chunk of the wrong shape fails its request, said in words), and
stamped with ``time.perf_counter()`` when its bytes arrive. Every failure is a
:class:`llmdeck.client.errors.ClientEndpointError`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from llmdeck.client.errors import (
    ClientEndpointError,
    MalformedStreamError,
    StreamErrorEvent,
    StreamShapeError,
    StreamTimeoutError,
    http_status_error,
    model_entries,
    not_answering,
)
from llmdeck.client.httpmap import _headers, _map_httpx_errors
from llmdeck.client.replies import (
    check_complete,
    chunk_text,
    first_choice,
    malformed_event,
    merge_tool_calls,
    raise_for_status,
    usage_counts,
)
from llmdeck.client.sync import get_models, health, server_version
from llmdeck.client.transport import LeanTransport
from llmdeck.client.types import StreamResult, Timeouts
from llmdeck.util.http import (
    JSON_CAP,
    METRICS_CAP,
    SSE_LINE_CAP,
    BodyTooLarge,
    aread_capped,
    raise_for_redirect,
)
from llmdeck.util.jsonsafe import loads as json_loads

__all__ = ["OpenAIClient", "get_models", "health", "server_version"]


class OpenAIClient:
    """Async client for one OpenAI-compatible server (``base_url`` without ``/v1``)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeouts = timeouts or Timeouts()
        t = self.timeouts
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=_headers(api_key),
            timeout=httpx.Timeout(connect=t.connect, read=t.read, write=t.read, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
        )
        # Streams go through the lean transport (same httpx API and errors, far less CPU per chunk).
        self._stream_http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={**_headers(api_key), "Accept-Encoding": "identity"},
            timeout=httpx.Timeout(connect=t.connect, read=t.read, write=t.read, pool=None),
            transport=LeanTransport(),
        )

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._stream_http.aclose()
        await self._http.aclose()

    # ---- streaming -------------------------------------------------------------------------

    async def stream_completion(
        self,
        model: str,
        prompt: str | list[int],
        *,
        max_tokens: int,
        ignore_eos: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> StreamResult:
        """Stream ``POST /v1/completions``; returns the timed result or raises a ClientEndpointError."""
        payload: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if ignore_eos:
            payload["ignore_eos"] = True
        if extra:
            payload.update(extra)
        return await self._stream("/v1/completions", payload, chat=False)

    async def stream_chat(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        ignore_eos: bool = False,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> StreamResult:
        """Stream ``POST /v1/chat/completions`` (content, reasoning and tool-call deltas kept apart)."""
        payload: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if ignore_eos:
            payload["ignore_eos"] = True
        if tools:
            payload["tools"] = tools
        if extra:
            payload.update(extra)
        return await self._stream("/v1/chat/completions", payload, chat=True)

    async def _stream(self, path: str, payload: dict[str, Any], *, chat: bool) -> StreamResult:
        url = self.base_url + path
        perf = time.perf_counter
        res = StreamResult(start=perf())
        try:
            with _map_httpx_errors(url, res):
                if self.timeouts.total is None:
                    await self._consume(path, payload, chat, res, url)
                else:
                    async with asyncio.timeout(self.timeouts.total):
                        await self._consume(path, payload, chat, res, url)
        except TimeoutError as exc:
            raise StreamTimeoutError(
                f"The request to {url} did not finish within {self.timeouts.total:g} s.",
                which="total",
                url=url,
                partial=res,
            ) from exc
        return res

    async def _consume(
        self, path: str, payload: dict[str, Any], chat: bool, res: StreamResult, url: str
    ) -> None:
        perf = time.perf_counter
        times = res.chunk_times
        text_parts: list[str] = []
        reasoning_parts: list[str] = []
        tools: dict[int, dict[str, Any]] = {}
        async with self._stream_http.stream("POST", path, json=payload) as resp:
            await raise_for_status(resp, url)
            pending = b""
            data: list[bytes] = []
            event = self._event
            async for raw in resp.aiter_raw():
                now = perf()
                if pending:
                    raw = pending + raw
                    pending = b""
                # fast path (vLLM's shape): whole "data: {...}\n\n" events, one line each
                if not data and raw[:6] == b"data: " and raw[-2:] == b"\n\n" and raw.count(b"\n") == 2:
                    event(raw[6:-2], now, chat, res, times, text_parts, reasoning_parts, tools)
                    continue
                lines = raw.split(b"\n")
                pending = lines.pop()
                if len(pending) > SSE_LINE_CAP:  # one endless line: nothing to parse, ever
                    raise BodyTooLarge(url, SSE_LINE_CAP, line=True)
                for line in lines:
                    if line[-1:] == b"\r":
                        line = line[:-1]
                    if not line:
                        if data:
                            payload_bytes = data[0] if len(data) == 1 else b"\n".join(data)
                            data.clear()
                            event(payload_bytes, now, chat, res, times, text_parts, reasoning_parts, tools)
                        continue
                    if line[:5] == b"data:":
                        data.append(line[6:] if line[5:6] == b" " else line[5:])
                    # comments (":"), "event:", "id:", "retry:" lines carry nothing we use
            now = perf()
            if pending.startswith(b"data:"):
                data.append(pending[5:].strip())
            if data:
                self._event(b"\n".join(data), now, chat, res, times, text_parts, reasoning_parts, tools)
            res.end = now
        res.text = "".join(text_parts)
        res.reasoning = "".join(reasoning_parts)
        res.tool_calls = [tools[i] for i in sorted(tools)]
        check_complete(res, url)

    @staticmethod
    def _event(
        payload: bytes,
        now: float,
        chat: bool,
        res: StreamResult,
        times: list[float],
        text_parts: list[str],
        reasoning_parts: list[str],
        tools: dict[int, dict[str, Any]],
    ) -> None:
        if payload == b"[DONE]":
            res.done = True
            return
        try:
            obj = json_loads(payload)
            if not isinstance(obj, dict):
                raise StreamShapeError("not a JSON object")
            choices = obj.get("choices")
            if choices:
                c = first_choice(choices)
                if chat:
                    delta = c.get("delta") or {}
                    if not isinstance(delta, dict):
                        raise StreamShapeError("choices[0].delta is not an object")
                    content = chunk_text(delta, "content", "delta")
                    reasoning = chunk_text(delta, "reasoning_content", "delta") or chunk_text(
                        delta, "reasoning", "delta"
                    )
                    tc = delta.get("tool_calls")
                    if content:
                        text_parts.append(content)
                    if reasoning:
                        reasoning_parts.append(reasoning)
                    if tc:
                        merge_tool_calls(tools, tc)
                    if content or reasoning or tc or "role" not in delta:
                        times.append(now)
                else:
                    text = chunk_text(c, "text", "choices[0]")
                    if text:
                        text_parts.append(text)
                    times.append(now)
                fr = c.get("finish_reason")
                if fr is not None:
                    res.finish_reason = str(fr)
            elif "error" in obj:
                err = obj["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                raise StreamErrorEvent(f"The server reported an error mid-stream: {msg}", partial=res)
            usage = obj.get("usage")
            if usage:
                res.prompt_tokens, res.completion_tokens = usage_counts(usage)
        except ClientEndpointError:
            raise
        except (ValueError, AttributeError, TypeError, KeyError, IndexError) as exc:
            raise malformed_event(payload, exc, res) from exc

    # ---- non-streaming ---------------------------------------------------------------------

    async def _json(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, limit: float | None = None
    ) -> Any:
        """One non-streaming request, bounded by ``limit`` (default: the probe limit) as a whole."""
        url = self.base_url + path
        limit = self.timeouts.probe if limit is None else limit
        try:
            with _map_httpx_errors(url):
                async with asyncio.timeout(limit), self._http.stream(method, path, json=body) as resp:
                    raise_for_redirect(resp, url)
                    status = resp.status_code
                    text = (await aread_capped(resp, url, cap=JSON_CAP)).decode("utf-8", "replace")
        except TimeoutError as exc:
            raise not_answering(url, limit) from exc
        if status >= 400:
            raise http_status_error(url, status, text, key_sent=bool(self.api_key))
        try:
            return json_loads(text)
        except ValueError as exc:
            raise MalformedStreamError(
                f"{url} did not answer JSON: {text[:200]!r}",
                url=url,
                hint="Check that the URL points at an OpenAI-compatible server (e.g. vLLM).",
            ) from exc

    async def complete(
        self, model: str, prompt: str | list[int], *, max_tokens: int, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Non-streaming ``/v1/completions``; returns the response JSON."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens, **(extra or {})}
        out: dict[str, Any] = await self._json("POST", "/v1/completions", body, limit=self.timeouts.total)
        return out

    async def chat(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Non-streaming ``/v1/chat/completions``; returns the response JSON."""
        body: dict[str, Any] = {"model": model, "messages": messages, **(extra or {})}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        out: dict[str, Any] = await self._json(
            "POST", "/v1/chat/completions", body, limit=self.timeouts.total
        )
        return out

    async def models(self) -> list[dict[str, Any]]:
        """``GET /v1/models`` -> the ``data`` list (vLLM adds ``max_model_len`` and ``root``)."""
        return model_entries(await self._json("GET", "/v1/models"), self.base_url + "/v1/models")

    async def health(self) -> bool:
        """True when ``GET /health`` answers 200."""
        try:
            with _map_httpx_errors(self.base_url + "/health"):
                async with asyncio.timeout(self.timeouts.probe):
                    resp = await self._http.get("/health", timeout=self.timeouts.connect)
        except TimeoutError:
            return False
        except ClientEndpointError:
            return False
        return resp.status_code == 200

    async def version(self) -> str | None:
        """The server's version from ``GET /version`` (vLLM), or None."""
        return await self._version_field("/version", "version")

    async def llamacpp_build(self) -> str | None:
        """llama-server's build from ``GET /props`` (it has no /version), as ``llama.cpp BUILD``, or None."""
        build = await self._version_field("/props", "build_info")
        return f"llama.cpp {build}" if build else None

    async def _version_field(self, path: str, key: str) -> str | None:
        try:
            data = await self._json("GET", path)
        except ClientEndpointError:
            return None
        v = data.get(key) if isinstance(data, dict) else None
        if isinstance(v, str | int | float) and not isinstance(v, bool) and str(v).strip():
            return str(v).strip()[:80]
        return None

    async def metrics_text(self) -> str | None:
        """The Prometheus text of ``GET /metrics``, or None when the server has none (404)."""
        url = self.base_url + "/metrics"
        try:
            with _map_httpx_errors(url):  # the lean transport: parsing a 100 KB page costs little
                async with (
                    asyncio.timeout(self.timeouts.probe),
                    self._stream_http.stream("GET", "/metrics") as resp,
                ):
                    if resp.status_code != 200:
                        return None
                    body = await aread_capped(resp, url, cap=METRICS_CAP)
        except TimeoutError as exc:
            raise not_answering(url, self.timeouts.probe) from exc
        return body.decode(resp.encoding or "utf-8", "replace")
