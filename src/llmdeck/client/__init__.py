"""llmdeck.client: the shared OpenAI-compatible client (async streaming + small sync helpers).

Public API (keep it small):

* :class:`OpenAIClient` (async): ``stream_completion``, ``stream_chat`` -> :class:`StreamResult`;
  ``complete``, ``chat`` (non-streaming, raw JSON); ``models``, ``health``, ``version``,
  ``metrics_text``.
* sync helpers: :func:`get_models`, :func:`health`, :func:`server_version`.
* :class:`Timeouts` (connect / read / total seconds).
* errors (all ``llmdeck.errors.EndpointError``): :class:`ServerUnreachableError`,
  :class:`HTTPStatusError` (``.status``, ``.body``), :class:`MalformedStreamError`,
  :class:`StreamErrorEvent`, :class:`StreamTimeoutError` (``.which``),
  :class:`ConnectionDroppedError`, :class:`ResponseTooLargeError` (an endless body or stream line),
  :class:`RedirectedError`; each has ``.kind`` and ``.partial``.
"""

from llmdeck.client.errors import (
    ClientEndpointError,
    ConnectionDroppedError,
    HTTPStatusError,
    MalformedStreamError,
    RedirectedError,
    ResponseTooLargeError,
    ServerUnreachableError,
    StreamErrorEvent,
    StreamTimeoutError,
)
from llmdeck.client.openai import OpenAIClient, get_models, health, server_version
from llmdeck.client.types import StreamResult, Timeouts

__all__ = [
    "ClientEndpointError",
    "ConnectionDroppedError",
    "HTTPStatusError",
    "MalformedStreamError",
    "OpenAIClient",
    "RedirectedError",
    "ResponseTooLargeError",
    "ServerUnreachableError",
    "StreamErrorEvent",
    "StreamResult",
    "StreamTimeoutError",
    "Timeouts",
    "get_models",
    "health",
    "server_version",
]
