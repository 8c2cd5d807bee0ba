"""Typed failures of the OpenAI client; all are :class:`llmdeck.errors.EndpointError` (exit 1).

Each carries ``kind`` (a short stable tag recorded in bench results) and, for stream failures,
``partial``: what had been received before the failure (may be ``None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.errors import EndpointError

if TYPE_CHECKING:
    from llmdeck.client.types import StreamResult


class ClientEndpointError(EndpointError):
    """Base of the client's errors."""

    kind: str = "endpoint"

    def __init__(
        self, message: str, *, hint: str | None = None, url: str = "", partial: StreamResult | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.url = url
        self.partial = partial


class ServerUnreachableError(ClientEndpointError):
    """The TCP connection could not be made (refused, DNS, connect timeout)."""

    kind = "unreachable"


class HTTPStatusError(ClientEndpointError):
    """The server answered with a non-2xx status."""

    kind = "http"

    def __init__(
        self, message: str, *, status: int, body: str, url: str = "", hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint, url=url)
        self.status = status
        self.body = body


class MalformedStreamError(ClientEndpointError):
    """The SSE stream carried something that is not an OpenAI chunk (bad JSON, not an object)."""

    kind = "malformed"


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
        which: str,
        url: str = "",
        hint: str | None = None,
        partial: StreamResult | None = None,
    ) -> None:
        super().__init__(message, hint=hint, url=url, partial=partial)
        self.which = which


class ConnectionDroppedError(ClientEndpointError):
    """The connection closed before the stream ended (no ``[DONE]``, incomplete body)."""

    kind = "dropped"
