"""A deadline over a whole HTTP exchange for httpx's sync client: connect, TLS, the request, the
status line and headers, and every chunk of the body.

httpx's timeouts bound each socket operation, not the exchange: a peer that accepts and then sends a
byte of its headers every half second is never "timed out" (each read returns in time) and holds a
caller without end. :func:`deadline_transport` gives an ``httpx.HTTPTransport`` whose sockets read
and write with at most the time left until the request's deadline: ``now + the largest of the
request's timeouts`` when the request starts. Past it, a read or write raises httpx's
``ReadTimeout``/``WriteTimeout`` (what a silent peer raises), so every caller's existing "not
answering" handling applies unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

_LOCAL = threading.local()


def _left() -> float | None:
    until: float | None = getattr(_LOCAL, "until", None)
    return None if until is None else until - time.monotonic()


def _bounded(timeout: float | None, exc: type[Exception]) -> float | None:
    left = _left()
    if left is None:
        return timeout
    if left <= 0:
        raise exc("no complete reply within the exchange's time limit")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        tls = self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout, httpcore.ConnectTimeout))
        return _Stream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _bounded(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = _bounded(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Body(httpx.SyncByteStream):
    """The response body, read under the request's deadline."""

    def __init__(self, inner: httpx.SyncByteStream, until: float | None) -> None:
        self._inner, self._until = inner, until

    def __iter__(self) -> Iterator[bytes]:
        it = iter(self._inner)
        while True:
            previous, _LOCAL.until = getattr(_LOCAL, "until", None), self._until
            try:
                chunk = next(it)
            except StopIteration:
                return
            except httpcore.ReadTimeout as exc:  # raised by our bound outside httpx's mapping
                raise httpx.ReadTimeout(str(exc)) from exc
            finally:
                _LOCAL.until = previous
            yield chunk

    def close(self) -> None:
        self._inner.close()


class DeadlineTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` with the whole exchange bounded (see the module doc)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pool._network_backend = _Backend()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        limits = [float(v) for v in timeouts.values() if isinstance(v, int | float) and v > 0]
        until = time.monotonic() + max(limits) if limits else None
        previous, _LOCAL.until = getattr(_LOCAL, "until", None), until
        try:
            response = super().handle_request(request)
        finally:
            _LOCAL.until = previous
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _Body(response.stream, until)
        return response


def deadline_transport(**kwargs: Any) -> httpx.HTTPTransport:
    """A transport for ``httpx.Client(transport=...)`` whose requests end by their deadline."""
    return DeadlineTransport(**kwargs)
