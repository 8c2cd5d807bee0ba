"""A client's request body, read bounded: in size (refused as it arrives, not after it is all in memory),
in time (a client that stops sending mid-body is answered, not waited on forever), and a client that
hangs up mid-body ends the request quietly (no traceback in the log); then parsed as a JSON object."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from llmdeck.gateway.proxy import openai_error
from llmdeck.util.jsonsafe import loads as json_loads

MAX_BODY_BYTES = 32 << 20
GONE = 499  # the status logged for a client that hung up (nginx's)


def too_large(limit: int) -> JSONResponse:
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
    return openai_error(413, f"The request body is over {size}.", "invalid_request_error", "body_too_large")


async def read_body(request: Request, *, idle_s: float, limit: int = MAX_BODY_BYTES) -> bytes | JSONResponse:
    """The whole body, or the error to answer: 413 (over ``limit``; a declared Content-Length over it
    is refused before a byte is read), 408 (nothing arrived for ``idle_s``), ``GONE`` (the client
    hung up; nobody reads that answer)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return too_large(limit)
    parts: list[bytes] = []
    size = 0
    chunks = request.stream()
    try:
        while True:
            try:
                async with asyncio.timeout(idle_s):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            size += len(chunk)
            if size > limit:
                return too_large(limit)
            parts.append(chunk)
    except TimeoutError:
        return openai_error(
            408,
            f"The request body stopped arriving: nothing came for {idle_s:g} s.",
            "invalid_request_error",
            "body_timeout",
        )
    except ClientDisconnect:
        return openai_error(GONE, "The client hung up while sending the request.", "invalid_request_error")
    return b"".join(parts)


def parse_body(raw: bytes, request: Request) -> dict[str, Any] | JSONResponse | None:
    """The body as a JSON object; None when there is none or it is not JSON by its content type."""
    if not raw:
        return None
    if "json" not in request.headers.get("content-type", "application/json"):
        return None
    try:
        body = json_loads(raw)
    except ValueError:
        return openai_error(400, "The request body is not valid JSON.", "invalid_request_error")
    if not isinstance(body, dict):
        return openai_error(400, "The request body must be a JSON object.", "invalid_request_error")
    return body
