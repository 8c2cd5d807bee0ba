"""Pieces of the OpenAI client's reply handling: tool-call deltas merged, a non-200 or redirect answer
turned into its error (reading only the head of the body), a stream checked for completeness."""

from __future__ import annotations

from typing import Any

import httpx

from llmdeck.client.errors import ConnectionDroppedError, MalformedStreamError, http_status_error
from llmdeck.client.types import StreamResult
from llmdeck.util.http import raise_for_redirect


def merge_tool_calls(tools: dict[int, dict[str, Any]], deltas: list[dict[str, Any]]) -> None:
    """Accumulate streamed tool-call deltas by ``index`` (name once, arguments concatenated)."""
    for d in deltas:
        idx = int(d.get("index", 0))
        cur = tools.get(idx)
        fn = d.get("function") or {}
        if cur is None:
            cur = tools[idx] = {
                "id": d.get("id"),
                "type": d.get("type", "function"),
                "function": {"name": fn.get("name") or "", "arguments": ""},
            }
        elif d.get("id") and not cur.get("id"):
            cur["id"] = d["id"]
        if fn.get("name") and not cur["function"]["name"]:
            cur["function"]["name"] = fn["name"]
        if fn.get("arguments"):
            cur["function"]["arguments"] += fn["arguments"]


async def head_of_body(resp: httpx.Response, limit: int = 4000) -> str:
    """The first ``limit`` bytes of an error body (the rest is never read: it may not end)."""
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        if len(buf) >= limit:
            break
    return bytes(buf[:limit]).decode("utf-8", "replace")


async def raise_for_status(resp: httpx.Response, url: str) -> None:
    raise_for_redirect(resp, url)
    if resp.status_code != 200:
        body = await head_of_body(resp)
        raise http_status_error(
            url,
            resp.status_code,
            body,
            hint="Check the model name, the request size against max_model_len, and the server log.",
            key_sent="authorization" in resp.request.headers,
        )


def check_complete(res: StreamResult, url: str) -> None:
    """A stream that ended without a finish or without output is an error, with what it got."""
    times = res.chunk_times
    if not res.done and res.finish_reason is None:
        raise ConnectionDroppedError(
            f"The stream from {url} ended before it was complete (no finish_reason, no [DONE]).",
            url=url,
            partial=res,
            hint="The server may have crashed or closed the connection; check its log.",
        )
    if not times:
        raise MalformedStreamError(
            f"The stream from {url} finished without any generated output chunk.",
            url=url,
            partial=res,
        )
