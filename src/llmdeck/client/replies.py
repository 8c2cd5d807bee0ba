"""Pieces of the OpenAI client's reply handling: tool-call deltas merged, a non-200 or redirect answer
turned into its error (reading only the head of the body), a stream checked for completeness."""

from __future__ import annotations

import json
from typing import Any

import httpx

from llmdeck.client.errors import (
    ConnectionDroppedError,
    MalformedStreamError,
    StreamShapeError,
    http_status_error,
)
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


# A usage count past this is no token count (and no integer JSON carries exactly).
_MAX_TOKEN_COUNT = 2**53


def first_choice(choices: object) -> dict[str, Any]:
    """``choices[0]`` of a chunk whose ``choices`` is not empty."""
    if not isinstance(choices, list):
        raise StreamShapeError("choices is not a list")
    first = choices[0]
    if not isinstance(first, dict):
        raise StreamShapeError("choices[0] is not an object")
    return first


def chunk_text(obj: dict[str, Any], key: str, where: str) -> str | None:
    """A text field of a chunk (``text``, ``content``, ``reasoning``): a string or absent."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise StreamShapeError(f"{where}.{key} is not a string")
    return value


def usage_counts(usage: object) -> tuple[int | None, int | None]:
    """``usage``'s (prompt_tokens, completion_tokens): each a whole number of tokens, or absent."""
    if not isinstance(usage, dict):
        raise StreamShapeError("usage is not an object")
    counts: list[int | None] = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKEN_COUNT
        ):
            raise StreamShapeError(f"usage.{key} is not a whole number of tokens")
        counts.append(value)
    return counts[0], counts[1]


def malformed_event(payload: bytes, exc: Exception, res: StreamResult) -> MalformedStreamError:
    """The error for a stream event that is not JSON or not shaped like an OpenAI chunk, in words."""
    if isinstance(exc, StreamShapeError):
        what = str(exc)
    elif isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        what = "not valid JSON"
    else:  # a tool-call delta that is not an object, an index that is not a number...
        what = "not shaped like an OpenAI chunk"
    snippet = payload[:200].decode("utf-8", "replace")
    return MalformedStreamError(
        f"The server sent a malformed stream event ({what}): {snippet!r}.",
        partial=res,
        hint="The server is not speaking OpenAI-compatible SSE; check the URL and the server.",
    )
