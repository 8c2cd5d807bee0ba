"""A client's request: its path checked (no step outside the endpoint it names); its body read bounded,
in size (refused as it arrives, not after it is all in memory) and in time (a client that stops sending
mid-body is answered, not waited on forever), a client that hangs up mid-body ending the request quietly
(no traceback in the log); then parsed as a JSON object. Starlette's plain-text 404/405 in the API's shape."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from llmdeck.gateway.proxy import GONE, RequestCtx, openai_error
from llmdeck.gateway.surfaces import api_of, reshape_error
from llmdeck.gateway.upstream import OFF_LOOP_BYTES, TOO_DEEP
from llmdeck.util.jsonsafe import NotJsonNumberError, TooDeepError, TooLongNumberError
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.safetext import is_unsafe

MAX_BODY_BYTES = 32 << 20
NOT_JSON_TYPES = frozenset({"application/x-www-form-urlencoded", "application/octet-stream"})


def too_large(limit: int) -> JSONResponse:
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
    return openai_error(413, f"The request body is over {size}.", "invalid_request_error", "body_too_large")


async def read_body(
    request: Request, *, idle_s: float, whole_s: float | None = None, limit: int = MAX_BODY_BYTES
) -> bytes | JSONResponse:
    """The whole body, or the error to answer: 413 (over ``limit``; a declared Content-Length over it
    is refused before a byte is read), 408 (nothing arrived for ``idle_s``, or the body was not whole
    within ``whole_s``: a byte now and then had held a connection for ever), ``GONE`` (the client
    hung up; nobody reads that answer)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return too_large(limit)
    parts: list[bytes] = []
    size = 0
    chunks = request.stream()
    end = None if whole_s is None else time.monotonic() + whole_s
    late = False
    try:
        while True:
            wait = idle_s if end is None else min(idle_s, end - time.monotonic())
            late = wait < idle_s  # the whole body's limit comes first
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            size += len(chunk)
            if size > limit:
                return too_large(limit)
            parts.append(chunk)
    except TimeoutError:
        why = f"it was not whole within {whole_s:g} s" if late else f"nothing came for {idle_s:g} s"
        return openai_error(
            408, f"The request body stopped arriving: {why}.", "invalid_request_error", "body_timeout"
        )
    except ClientDisconnect:
        return openai_error(GONE, "The client hung up while sending the request.", "invalid_request_error")
    return b"".join(parts)


async def parse_body(raw: bytes, request: Request) -> dict[str, Any] | JSONResponse | None:
    """The body as a JSON object; None when there is none or it is a form or a file (an audio upload).

    Any other body is read as JSON whatever its content type says (a browser's fetch sends JSON as
    text/plain; `curl -d '{...}'` as a form): one passed on unread would skip the alias, the route's
    defaults and its override ("Say which model", to a body that did). A body over ``OFF_LOOP_BYTES``
    is parsed in a thread: 30 MB took seconds, every client waiting."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not raw or kind.startswith("multipart/"):
        return None
    if kind in NOT_JSON_TYPES and raw.lstrip()[:1] != b"{":  # a form's a=1&b=2, a file's bytes
        return None
    return await parse_json_object(raw)


async def parse_json_object(raw: bytes) -> dict[str, Any] | JSONResponse:
    """``raw`` as a JSON object, or the 400 that says what it is instead."""
    try:
        if len(raw) > OFF_LOOP_BYTES:
            body = await asyncio.to_thread(json_loads, raw, strict_numbers=True)
        else:
            body = json_loads(raw, strict_numbers=True)
    except TooDeepError:
        return openai_error(400, TOO_DEEP, "invalid_request_error")
    except TooLongNumberError:
        return openai_error(
            400, "The request body holds a number of over 4,300 digits.", "invalid_request_error"
        )
    except NotJsonNumberError as bad:
        return openai_error(400, f"The request body holds {bad.msg}.", "invalid_request_error")
    except ValueError:
        return openai_error(400, "The request body is not valid JSON.", "invalid_request_error")
    if not isinstance(body, dict):
        return openai_error(400, "The request body must be a JSON object.", "invalid_request_error")
    return body


def path_problem(request: Request) -> JSONResponse | None:
    """A path with a ``.``/``..`` segment or an encoded slash: passed on, it would reach another of the
    backend's endpoints than the one it names (vLLM's /sleep, /collective_rpc) with the gateway's key.
    A control character (%01, %1b, %7f): no URL can carry it on (it had been a 500 with a traceback)."""
    path = request.url.path  # percent-decoded: %2e%2e is ".." here
    if any(is_unsafe(ch) or ch in "\n\t" for ch in path):
        return openai_error(
            400,
            f"The path {path[:200]!r} holds a control character, which no URL can carry on; "
            "send the API's path as it is named, e.g. /v1/chat/completions.",
            "invalid_request_error",
            "bad_path",
        )
    raw = bytes(request.scope.get("raw_path") or b"").lower()
    if not any(seg in (".", "..") for seg in path.split("/")) and b"%2f" not in raw and "\\" not in path:
        return None
    return openai_error(
        400,
        f"The path {path[:200]!r} steps out of its endpoint (a '.' or '..' segment, an encoded slash or "
        "a backslash); the gateway passes on the API's paths as they are named, e.g. /v1/chat/completions.",
        "invalid_request_error",
        "bad_path",
    )


async def no_such_endpoint(request: Request, exc: Exception) -> Response:
    """Starlette's plain-text 404/405, in the shape of the API the path belongs to."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    path = request.url.path[:200]
    if status == 405:
        message, code = f"{request.method} is not allowed on {path}.", "method_not_allowed"
    else:
        message, code = (
            f"No endpoint {path} here. The API is under /v1 (e.g. POST /v1/chat/completions): give your "
            "client the base URL http://HOST:PORT/v1.",
            "not_found",
        )
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}
    gateway = getattr(request.app.state, "gateway", None)
    if gateway is not None:  # an access-log line for every request, these too
        RequestCtx(gateway.metrics, request.method, request.url.path).finish(status, code)
    return reshape_error(
        openai_error(status, message, "invalid_request_error", code, **headers), api_of(path)
    )


async def hung_up(request: Request) -> None:
    """Return when the client hangs up (its body read, the next ASGI message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
