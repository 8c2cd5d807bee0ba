"""Typed failures of the OpenAI client; all are :class:`llmdeck.errors.EndpointError` (exit 1).

Each carries ``kind`` (a short stable tag recorded in bench results) and, for stream failures,
``partial``: what had been received before the failure (may be ``None``).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from llmdeck.errors import EndpointError, InternalError

if TYPE_CHECKING:
    from llmdeck.client.types import StreamResult

API_KEY_HINT = (
    "It needs an API key: pass --api-key or set LLMDECK_API_KEY (the key the server was started with)."
)


class ClientEndpointError(EndpointError):
    """Base of the client's errors."""

    kind: str = "endpoint"

    def __init__(
        self, message: str, *, hint: str | None = None, url: str = "", partial: StreamResult | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.url = url
        self.partial = partial

    def reworded(self, message: str, *, hint: str | None = None) -> ClientEndpointError:
        """A copy with another message (and hint), keeping the kind and every attribute."""
        out = copy.copy(self)
        out.args = (message,)
        out.message = message
        out.hint = hint if hint is not None else self.hint
        return out


class ServerUnreachableError(ClientEndpointError):
    """The TCP connection could not be made (refused, DNS, connect timeout)."""

    kind = "unreachable"


class HTTPStatusError(ClientEndpointError):
    """The server answered with a non-2xx status."""

    kind = "http"

    def __init__(
        self, message: str, *, status: int = 0, body: str = "", url: str = "", hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint, url=url)
        self.status = status
        self.body = body


class MalformedStreamError(ClientEndpointError):
    """The SSE stream carried something that is not an OpenAI chunk (bad JSON, not an object)."""

    kind = "malformed"


class StreamShapeError(InternalError, ValueError):
    """A stream event that is JSON but not shaped like an OpenAI chunk; its text says what is off
    (turned into a :class:`MalformedStreamError` with the event quoted)."""


class StreamErrorEvent(ClientEndpointError):
    """The server sent an ``{"error": ...}`` object inside the stream."""

    kind = "stream_error"


class StreamTimeoutError(ClientEndpointError):
    """A connect, read (gap between bytes) or total timeout expired."""

    kind = "timeout"

    def __init__(
        self,
        message: str,
        *,
        which: str = "total",
        url: str = "",
        hint: str | None = None,
        partial: StreamResult | None = None,
    ) -> None:
        super().__init__(message, hint=hint, url=url, partial=partial)
        self.which = which


class ResponseTooLargeError(ClientEndpointError):
    """The server sent more than the cap: an endless body, or one endless line of a stream."""

    kind = "too_large"


class RedirectedError(ClientEndpointError):
    """The server answered with a redirect (the client follows none)."""

    kind = "redirect"


class ConnectionDroppedError(ClientEndpointError):
    """The connection closed before the stream ended (no ``[DONE]``, incomplete body)."""

    kind = "dropped"


REJECTED_KEY_HINT = (
    "Use the key the server was started with (its --api-key / VLLM_API_KEY): pass it with --api-key or "
    "LLMDECK_API_KEY."
)


def http_status_error(
    url: str, status: int, body: str, hint: str | None = None, *, key_sent: bool | None = None
) -> HTTPStatusError:
    """The error for a non-2xx answer; 401/403 say that an API key is needed, or that the one sent was
    rejected (``key_sent``; None: not known), and how to give the right one."""
    snippet = " ".join(body.split())[:300]
    if status in (401, 403):
        word = "Unauthorized" if status == 401 else "Forbidden"
        why = (
            "the server needs an API key (or rejects the one sent)"
            if key_sent is None
            else "the server rejected the API key sent"
            if key_sent
            else "the server needs an API key and none was sent"
        )
        return HTTPStatusError(
            f"{url} answered HTTP {status} {word}: {why}.",
            status=status,
            body=body[:4000],
            url=url,
            hint=REJECTED_KEY_HINT if key_sent else API_KEY_HINT,
        )
    if status in BUSY:
        return HTTPStatusError(
            f"{url} answered HTTP {status} {BUSY[status]}: the server, or a proxy in front of it, is "
            "overloaded or rate-limiting.",
            status=status,
            body=body[:4000],
            url=url,
            hint="Wait and run again; if it lasts, see what else uses the server (`llmdeck status`) or the "
            "proxy's limits.",
        )
    return HTTPStatusError(
        f"{url} answered HTTP {status}: {snippet or '(empty body)'}",
        status=status,
        body=body[:4000],
        url=url,
        hint=hint or "Check the URL (an OpenAI-compatible server answers /v1/...) and the server's log.",
    )


BUSY = {429: "Too Many Requests", 503: "Service Unavailable"}  # an answer to come back later, not a wrong URL


def not_answering(url: str, seconds: float) -> StreamTimeoutError:
    """A server that accepted the connection but sent no complete answer in time."""
    return StreamTimeoutError(
        f"{url} is not answering: no complete reply within {seconds:g} s.",
        which="probe",
        url=url,
        hint="The server accepted the connection but does not reply; check that it finished loading "
        "(`llmdeck logs`), or raise the limit if it is just slow.",
    )


def model_entries(data: Any, url: str) -> list[dict[str, Any]]:
    """The ``data`` list of a /v1/models answer, each entry an object with a string ``id``.

    Raises MalformedStreamError (exit 1) for a wrong shape (``[]``, ``{"data": {}}``, entries without
    an id); an empty list is returned as such (the caller says "serves no model")."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise MalformedStreamError(
            f'{url} answered JSON without a "data" list of models: {str(data)[:200]!r}',
            url=url,
            hint="Check that the URL points at an OpenAI-compatible server (e.g. vLLM).",
        )
    good = [m for m in items if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]
    if len(good) != len(items):
        raise MalformedStreamError(
            f'{url} lists models without a string "id": {str(items)[:200]!r}',
            url=url,
            hint="Check that the URL points at an OpenAI-compatible server (e.g. vLLM).",
        )
    return good


# Above the longest context any model has (10M tokens) by ten: a larger one is no real setting, and
# `llmdeck check` builds a prompt of that many tokens.
MAX_REPORTED_CONTEXT = 100_000_000


def _context_field(entry: dict[str, Any]) -> tuple[str, Any]:
    """(field name, value) of a /v1/models entry's context length: vLLM's ``max_model_len``, else
    llama.cpp's server's ``meta.n_ctx`` (its slot's context; 0 there means a model not loaded yet)."""
    if entry.get("max_model_len") is not None:
        return "max_model_len", entry["max_model_len"]
    meta = entry.get("meta")
    if isinstance(meta, dict) and meta.get("n_ctx") not in (None, 0):
        return "meta.n_ctx", meta["n_ctx"]
    return "max_model_len", None


def reported_max_model_len(entry: dict[str, Any], url: str) -> int | None:
    """The context length of one /v1/models entry: ``max_model_len`` (vLLM) or ``meta.n_ctx``
    (llama.cpp's server, tools/server/server-context.cpp: its slot's context); None when the server
    reports neither (Ollama, most proxies), a whole number of tokens from 1 to
    :data:`MAX_REPORTED_CONTEXT` when it does.

    Anything else (-5, 0, "lots", 4096.5, true, 1e30) raises MalformedStreamError (exit 1), naming the
    field and the value. Every command that reads it (status, check, connect, bench) stops on it rather
    than going on without it: each either hands the number on (status --json, check's report, the
    client config connect writes) or sizes its requests by it (bench's skips, check's long-context
    prompt), and a server that reports an impossible context length is misconfigured or not what it
    claims to be, so nothing measured or written against it would hold."""
    field, value = _context_field(entry)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_REPORTED_CONTEXT:
        return value
    import json

    shown = json.dumps(value, default=str)[:60]
    raise MalformedStreamError(
        f"{url} reports {field} {shown} for {str(entry.get('id'))[:100]!r}: a server's context "
        f"length is a whole number of tokens from 1 to {MAX_REPORTED_CONTEXT:,}.",
        url=url,
        hint="Check the server (vLLM reports its --max-model-len there, llama.cpp's server its -c per "
        "slot) or whatever proxy sits in front of it; restart it with a valid context length.",
    )
