"""httpx's exceptions mapped to the client's typed errors, and the auth header."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx

from llmdeck.client.errors import (
    ClientEndpointError,
    ConnectionDroppedError,
    RedirectedError,
    ResponseTooLargeError,
    ServerUnreachableError,
    StreamTimeoutError,
)
from llmdeck.client.types import StreamResult
from llmdeck.util.http import BodyTooLarge, Redirected
from llmdeck.util.net import connect_failure

_HINT_UNREACHABLE = "Check that the server is running (`llmdeck status`) and that the URL and port are right."


# An httpx error with no text of its own, said by its kind (the first that matches): `exc or ...` had
# never fallen back (an exception is always true) and printed "()" or nothing.
_KIND_WORDS: tuple[tuple[type[httpx.HTTPError], str], ...] = (
    (httpx.RemoteProtocolError, "the server closed the connection or broke the HTTP exchange"),
    (httpx.ReadError, "the connection failed while the reply was read"),
    (httpx.WriteError, "the connection failed while the request was sent"),
    (httpx.CloseError, "the connection failed while it was closed"),
    (httpx.ProxyError, "the proxy refused or failed"),
    (httpx.UnsupportedProtocol, "the URL is not http:// or https://"),
    (httpx.TooManyRedirects, "too many redirects"),
    (httpx.DecodingError, "the reply could not be decoded"),
)


def http_failure_words(exc: BaseException, default: str = "no reason given") -> str:
    """Why an httpx request failed, in words: the exception's own text, else words for its kind, else
    ``default`` (never an httpx class name)."""
    text = str(exc).strip()
    if text:
        return text
    return next((words for kind, words in _KIND_WORDS if isinstance(exc, kind)), default)


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


@contextlib.contextmanager
def _map_httpx_errors(url: str, partial: StreamResult | None = None) -> Iterator[None]:
    """Turn httpx's exceptions into the client's typed errors."""
    try:
        yield
    except BodyTooLarge as exc:
        raise ResponseTooLargeError(exc.message, hint=exc.hint, url=url, partial=partial) from exc
    except Redirected as exc:
        raise RedirectedError(exc.message, hint=exc.hint, url=url, partial=partial) from exc
    except httpx.ConnectTimeout as exc:
        raise StreamTimeoutError(
            f"Connecting to {url} timed out.", which="connect", url=url, hint=_HINT_UNREACHABLE
        ) from exc
    except httpx.ConnectError as exc:
        raise ServerUnreachableError(
            f"Cannot connect to {url} ({connect_failure(exc) or 'connection refused'}).",
            url=url,
            hint=_HINT_UNREACHABLE,
        ) from exc
    except httpx.ReadTimeout as exc:
        raise StreamTimeoutError(
            f"No data from {url} within the read timeout; the server stalled.",
            which="read",
            url=url,
            partial=partial,
            hint="Raise the read timeout if the server is just slow (long prefill), else check its log.",
        ) from exc
    except (httpx.WriteTimeout, httpx.PoolTimeout) as exc:
        raise StreamTimeoutError(f"Sending to {url} timed out.", which="write", url=url) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError) as exc:
        raise ConnectionDroppedError(
            f"The connection to {url} dropped mid-response ({http_failure_words(exc)}).",
            url=url,
            partial=partial,
            hint="The server may have crashed or restarted; check its log.",
        ) from exc
    except httpx.HTTPError as exc:
        raise ClientEndpointError(f"Request to {url} failed: {http_failure_words(exc)}.", url=url) from exc
