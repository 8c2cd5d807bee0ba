"""The APIs the gateway serves besides chat completions: Anthropic Messages and OpenAI Responses.

* ``api_of(path)``: which API a request path belongs to (it picks the error shape, the rewriting and the
  missing-surface message).
* ``rewrite_for``: a route's ``defaults``/``override`` per API. Chat and completions get them as written.
  Messages and Responses get them with the field names that API uses (``max_tokens`` and
  ``max_completion_tokens`` become Responses' ``max_output_tokens``; ``stop`` becomes Messages'
  ``stop_sequences``), unless the route has a block of its own for that API (``messages:`` or
  ``responses:``, each with ``defaults``/``override``), which then replaces the route's for that API.
  ``count_tokens`` gets only the alias rewrite (nothing it counts comes from defaults) and the
  ``messages:`` block's ``fold_system``, so it counts what ``/v1/messages`` will be sent.
* ``anthropic_error`` / ``reshape_error``: errors on ``/v1/messages*`` in Anthropic's shape, which Claude
  Code shows; everything else keeps OpenAI's.
* ``ResponseIds``: which route and backend produced a ``resp_…`` id (bounded), so ``GET /v1/responses/{id}``
  and a ``previous_response_id`` reach the backend that stored it.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

from starlette.responses import JSONResponse

from llmdeck.gateway.merge import rewrite_request
from llmdeck.gateway.outcap import CONTEXT
from llmdeck.util.jsonsafe import loads as json_loads

Api = Literal[
    "chat", "completions", "messages", "count_tokens", "responses", "response_id", "embeddings", "other"
]

_PATHS: dict[str, Api] = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
}
# a route's generic field names, as each API spells them
_RENAME: dict[str, dict[str, str]] = {
    "responses": {"max_tokens": "max_output_tokens", "max_completion_tokens": "max_output_tokens"},
    "messages": {"max_completion_tokens": "max_tokens", "stop": "stop_sequences"},
}
# what a backend that lacks the surface should be told (HTTP 404/405 on it with no API error body)
_MISSING: dict[str, str] = {
    "messages": "the Anthropic Messages API (/v1/messages); vLLM >= 0.12 serves it",
    "count_tokens": "Anthropic's /v1/messages/count_tokens; vLLM >= 0.32 serves it",
    "responses": "the OpenAI Responses API (/v1/responses); vLLM >= 0.10 serves it",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_RESP_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]{1,200})"')
# vLLM 0.32's words for a prompt over max_model_len (its error code is the number 400)
_SEQ = re.compile(rb'"sequence_number"\s*:\s*(\d{1,18})')


def api_of(path: str) -> Api:
    if path.startswith("/v1/responses/"):
        return "response_id"
    return _PATHS.get(path, "other")


def is_anthropic(api: str) -> bool:
    return api in ("messages", "count_tokens")


def _renamed(fields: dict[str, Any], api: str) -> dict[str, Any]:
    names = _RENAME.get(api, {})
    return {names.get(k, k): v for k, v in fields.items()}


def rewrite_for(api: str, body: dict[str, Any], route: Any) -> None:
    """Apply the route's defaults/override for this API to the body (in place)."""
    if api in ("chat", "completions"):
        rewrite_request(body, defaults=route.defaults, override=route.override, served_model=None)
    elif api in ("messages", "responses"):
        own = route.per_api.get(api)
        if own is not None:
            defaults, override = own.get("defaults", {}), own.get("override", {})
        else:
            defaults, override = _renamed(route.defaults, api), _renamed(route.override, api)
        rewrite_request(body, defaults=defaults, override=override, served_model=None)
        if api == "messages" and own is not None and own.get("fold_system"):
            fold_system_messages(body)
    elif api == "count_tokens":
        own = route.per_api.get("messages")
        if own is not None and own.get("fold_system"):  # the same body is counted as will be sent
            fold_system_messages(body)


def _text_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _foldable(content: Any) -> bool:
    """Text as the Messages API writes it: none, a string, or a list of blocks."""
    return content is None or isinstance(content, str | list)


def fold_system_messages(body: dict[str, Any]) -> None:
    """Move ``role: system`` entries of a Messages body's ``messages`` to the end of its ``system``.

    Claude Code (2.1.197, 2.1.332) sends its environment and agent types as a second, mid-conversation
    system message (2.1.332: a list of text blocks); vLLM 0.22.0's Messages API refuses the request
    ("Input should be 'user' or 'assistant'", measured on the H200, evidence/device/agents/), and chat
    templates that allow one system message only (Qwen3.6, vllm#41114) refuse it too.
    Text kept, order kept, only its place changes.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    moved = [m for m in messages if isinstance(m, dict) and m.get("role") == "system"]
    if not moved or not all(_foldable(c) for c in [body.get("system"), *(m.get("content") for m in moved)]):
        return  # none, or a shape no API takes (an object, a number): the backend says so, no text lost
    body["messages"] = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    system = _text_blocks(body.get("system"))
    for message in moved:
        system.extend(_text_blocks(message.get("content")))
    body["system"] = system


def missing_surface_message(api: str, backend: str) -> str | None:
    if api == "embeddings":  # no upgrade brings them to a chat model
        return (
            f"The backend {backend} serves no embeddings (it answered 404/405 on /v1/embeddings): vLLM "
            "serves them for an embedding model (`vllm serve MODEL --runner pooling`); route this alias "
            "to such a server."
        )
    what = _MISSING.get(api)
    if what is None:
        return None
    return (
        f"The backend {backend} does not serve {what} (it answered 404/405): upgrade it, or point a "
        "chat-completions client (/v1/chat/completions) at this gateway instead."
    )


STREAM_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})


def asks_stream(value: Any) -> bool:
    """Whether a body's ``stream`` asks for one, as vLLM's request models read it (pydantic's lax bool:
    "false" or "no" is no stream; the gateway had waited a stream's first-byte time for a whole answer)."""
    if isinstance(value, str):
        return value.strip().lower() in STREAM_WORDS
    return value is True or (isinstance(value, int | float) and not isinstance(value, bool) and value == 1)


def lacks_surface(status: int, body: bytes) -> bool:
    """A 404/405 that is the server's router (no such path), not an API error about the request."""
    if status not in (404, 405):
        return False
    try:
        obj = json_loads(body)  # a backend's body: nested too deep is a ValueError here
    except ValueError:
        return True  # "404 page not found" (Ollama), an HTML page
    if not isinstance(obj, dict):
        return True
    return "error" not in obj and obj.get("type") != "error"  # FastAPI's {"detail": "Not Found"}


def overflow_candidate(api: str, status: int, headers: Mapping[str, str]) -> bool:
    """A 400 with a small plain body on an API with an output cap: read whole, not relayed as it comes
    (``with_overflow_code`` on OpenAI's APIs; ``outcap.refused_limit`` on all four); on /v1/messages a
    500 too (vLLM 0.22 answers its validation's refusals so: ``outcap.client_error``)."""
    size = headers.get("content-length", "")
    small = size.isdigit() and int(size) <= 65536 and "content-encoding" not in headers
    refused = status == 400 or (status == 500 and api == "messages")
    return refused and api in ("chat", "completions", "messages", "responses") and small


def with_overflow_code(api: str, status: int, body: bytes) -> bytes | None:
    """A backend's 400 for a prompt over its context, on an OpenAI API, with OpenAI's code for it
    (``context_length_exceeded``); None for any other reply. vLLM 0.32 says so in words, with ``code:
    400``: Codex (0.171.0) printed that JSON body; with the code it says "Codex ran out of room in the
    model's context window" (evidence/gateway/results/codex_overflow.txt). The message stays vLLM's."""
    if status != 400 or api not in ("chat", "completions", "responses"):
        return None
    try:
        obj = json_loads(body)
        error = obj["error"]
        if not CONTEXT.search(str(error["message"])) or error.get("code") == "context_length_exceeded":
            return None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    error.update(type="invalid_request_error", code="context_length_exceeded")
    return json.dumps(obj).encode()


def anthropic_error(status: int, message: str, **headers: str) -> JSONResponse:
    kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if kind == "overloaded_error" and headers.get("x-should-retry") == "false":
        kind = "api_error"  # overloaded says "retry soon"; a model that cannot fit or start will not
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers or None)


def reshape_error(resp: JSONResponse, api: str) -> JSONResponse:
    """An OpenAI-shaped error of the gateway's own, in Anthropic's shape where the API is Anthropic's."""
    if not is_anthropic(api):
        return resp
    try:
        message = str(json.loads(bytes(resp.body))["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return resp
    keep = {k: v for k, v in resp.headers.items() if k.lower() in ("retry-after", "x-should-retry")}
    return anthropic_error(resp.status_code, message, **keep)


def _sse(event: str, body: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: ".encode() + json.dumps(body).encode() + b"\n\n"


def stream_error_event(api: str, message: str, trail: ResponsesTrail | None = None) -> bytes:
    """The event that ends a stream the backend broke, in the stream's own API's shape.

    A Responses stream ends with ``error`` and then ``response.failed`` (its response ``status:
    "failed"`` with the error), each with the next ``sequence_number``: Codex (0.171.0) reads only a
    ``response.failed`` or ``response.completed`` as a stream's end, and had retried five times on
    "stream closed before response.completed" without ever showing the gateway's reason."""
    if is_anthropic(api):
        return _sse("error", {"type": "error", "error": {"type": "api_error", "message": message}})
    if api == "responses":
        trail = trail or ResponsesTrail()
        error = {"type": "error", "code": "stream_broken", "message": message, "param": None}
        failed = {"type": "response.failed", "response": trail.failed(message)}
        return _sse("error", trail.numbered(error)) + _sse("response.failed", trail.numbered(failed))
    body = {"error": {"message": message, "type": "upstream_error", "param": None, "code": "stream_broken"}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class ResponsesTrail:
    """What a Responses stream said so far, to end it in its own terms: the last ``sequence_number``
    and the ``response`` object of its ``response.created`` (id, model, created_at). Fed whole events."""

    LIMIT = 1 << 20  # the response object (it echoes the instructions and tools) is parsed once

    def __init__(self) -> None:
        self._seq = -1  # the last sequence_number read (of ``_numbered``, or one this trail numbered)
        self._numbered = b""  # the last events fed that hold a sequence_number, read when one is asked
        self.response: dict[str, Any] | None = None

    @property
    def last_seq(self) -> int:
        """The stream's last ``sequence_number`` (read only when a broken stream is ended: a regex
        over every event had been ~3% of the relay's CPU on Responses)."""
        for m in _SEQ.finditer(self._numbered):
            self._seq = max(self._seq, int(m.group(1)))
        self._numbered = b""
        return self._seq

    def feed(self, events: bytes) -> None:
        if b"sequence_number" in events:  # numbers only grow (vLLM counts its events): the last
            self._numbered = events  # events that hold any hold the highest
        if self.response is None and b"response.created" in events and len(events) <= self.LIMIT:
            for line in events.splitlines():
                if line.startswith(b"data:") and b"response.created" in line:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        obj = json_loads(line[5:]).get("response")
                        self.response = obj if isinstance(obj, dict) else None

    def numbered(self, event: dict[str, Any]) -> dict[str, Any]:
        self._seq = self.last_seq + 1
        return {**event, "sequence_number": self._seq}

    def failed(self, message: str) -> dict[str, Any]:
        """The stream's response, failed with ``message`` (a minimal one if none was seen)."""
        base = self.response or {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "output": []}
        base = {"created_at": int(time.time()), **base}
        error = {"code": "server_error", "message": message}
        return {**base, "status": "failed", "error": error, "incomplete_details": None}


def response_id_of(path: str) -> str:
    """``/v1/responses/resp_1/cancel`` -> ``resp_1``."""
    return path.removeprefix("/v1/responses/").split("/", 1)[0]


class ResponseIds:
    """``resp_…`` id -> (alias, backend URL), the newest ``limit`` of them."""

    def __init__(self, limit: int = 10000) -> None:
        self.limit = limit
        self._ids: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def remember(self, rid: str, alias: str, backend_url: str) -> None:
        self._ids[rid] = (alias, backend_url)
        self._ids.move_to_end(rid)
        while len(self._ids) > self.limit:
            self._ids.popitem(last=False)

    def get(self, rid: str) -> tuple[str, str] | None:
        return self._ids.get(rid)


class IdSniffer:
    """The first ``"id": "resp_…"`` in a reply's first 64 KiB (``response.created`` or the JSON body)."""

    LIMIT = 64 << 10

    def __init__(self) -> None:
        self._seen = b""
        self.rid: str | None = None
        self.done = False

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return
        self._seen += chunk
        if (m := _RESP_ID.search(self._seen)) is not None:
            self.rid, self.done = m.group(1).decode(), True
        elif len(self._seen) > self.LIMIT:
            self.done = True
