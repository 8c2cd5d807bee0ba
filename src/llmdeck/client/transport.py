"""A lean HTTP/1.1 transport for httpx, used for the streaming requests.

httpx's default stack (httpcore + h11 + anyio) spends most of a benchmark client's CPU time on
each small SSE chunk. This transport plugs into ``httpx.AsyncClient(transport=...)`` and reads
with a plain ``asyncio.Protocol``: bytes are appended to a buffer, chunked framing is cut with
``bytes.find``, and the read timeout is one timer re-armed only when it fires. It raises httpx's
own exceptions (ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError), so callers see
the same errors as with the default transport. Keep-alive connections are pooled per host (64 idle
at most, each closed after 4 s idle: idlepool.py).
"""

from __future__ import annotations

import asyncio
import errno
import re
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx

from llmdeck.client.idlepool import EXPIRY_S, MOST, IdlePool

_HEAD_CAP = 64 << 10  # status line and headers
_LINE_CAP = 64 << 10  # a chunk-size line, the trailer
_HIGH_WATER = 1 << 20  # bytes read ahead of the reader before reading pauses
_INTERIM_CAP = 32  # 1xx heads before the answer's (100 Continue, 103 Early Hints)


class _Conn(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.eof = False
        self.waiter: asyncio.Future[None] | None = None
        self.last = loop.time()
        self.idle_since = self.last  # when it went back to the pool (idlepool.py)
        self.timeout: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.paused = False  # reading paused: the reader is _HIGH_WATER behind
        self.answered = False  # a byte came since the request was written
        self.reset: Exception | None = None  # why the connection broke (a reset), None for a clean close

    # -- protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport (the gateway runs under uvicorn with uvloop) is not an asyncio.Transport
        # subclass, but has the same interface
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.answered = True
        self.buf += data
        self.last = self.loop.time()
        if len(self.buf) > _HIGH_WATER and not self.paused and self.transport is not None:
            # back-pressure: a reader that does not keep up (the gateway relaying to a slow client) no
            # longer makes the whole reply pile up in memory; the peer's sends wait instead
            self.transport.pause_reading()
            self.paused = True
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.reset = exc
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- reading
    def _on_timer(self) -> None:
        self._timer = None
        w = self.waiter
        if w is None or w.done() or self.timeout is None:
            return
        due = self.last + self.timeout
        if self.loop.time() >= due - 1e-3:
            w.set_exception(httpx.ReadTimeout(f"no data for {self.timeout:g} s"))
        else:
            self._timer = self.loop.call_at(due, self._on_timer)

    async def wait(self) -> None:
        """Wait until more bytes arrive (or EOF); raises httpx.ReadTimeout after ``timeout`` of silence."""
        if self.eof:
            return
        if self.paused and self.transport is not None:  # the reader caught up: more bytes are wanted
            self.transport.resume_reading()
            self.paused = False
        self.waiter = self.loop.create_future()
        if self.timeout is not None and self._timer is None:
            self._timer = self.loop.call_at(self.last + self.timeout, self._on_timer)
        try:
            await self.waiter
        finally:
            self.waiter = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.close()

    @property
    def usable(self) -> bool:
        return (
            not self.eof and self.transport is not None and not self.transport.is_closing() and not self.buf
        )


class _Body(httpx.AsyncByteStream):
    """The response body, de-framed (chunked, content-length or until close)."""

    def __init__(
        self,
        pool: LeanTransport,
        key: tuple[str, str, int],
        conn: _Conn,
        framing: tuple[bool, int | None, bool],
    ) -> None:
        self.pool = pool
        self.key = key
        self.conn = conn
        self.chunked, self.remaining, close = framing
        self.keep_alive = not close and (self.chunked or self.remaining is not None)
        self.done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self.conn
        buf = conn.buf
        if self.chunked:
            while True:
                size = await self._chunk_size()
                if size == 0:
                    await self._trailer()
                    break
                while size > 0:  # a chunk's bytes as they come: a huge declared size is never buffered
                    if not buf:
                        await self._more()
                        continue
                    data = bytes(buf[:size])
                    del buf[: len(data)]
                    size -= len(data)
                    yield data
                while len(buf) < 2:
                    await self._more()
                del buf[:2]
        elif self.remaining is not None:
            while self.remaining > 0:
                if not buf:
                    await self._more()
                    continue
                take = min(len(buf), self.remaining)
                data = bytes(buf[:take])
                del buf[:take]
                self.remaining -= take
                yield data
        else:
            while True:
                if buf:
                    data = bytes(buf)
                    buf.clear()
                    yield data
                if conn.eof:
                    if conn.reset is not None:  # a body that ends at the close, cut by a reset: no end
                        raise httpx.ReadError(f"the connection was reset mid-body ({conn.reset})")
                    break
                await conn.wait()
        self.done = True

    async def _chunk_size(self) -> int:
        buf = self.conn.buf
        while (i := buf.find(b"\r\n")) < 0:
            if len(buf) > _LINE_CAP:
                raise httpx.RemoteProtocolError("a chunk-size line longer than 64 KiB")
            await self._more()
        try:
            size = int(bytes(buf[:i]).split(b";", 1)[0].strip() or b"0", 16)
        except ValueError as exc:
            raise httpx.RemoteProtocolError(f"bad chunk size {bytes(buf[:i])[:40]!r}") from exc
        del buf[: i + 2]
        return size

    async def _trailer(self) -> None:
        buf = self.conn.buf
        while True:  # the trailer: header lines, then an empty one
            while (i := buf.find(b"\r\n")) < 0:
                if len(buf) > _LINE_CAP:
                    raise httpx.RemoteProtocolError("a chunked trailer longer than 64 KiB")
                await self._more()
            del buf[: i + 2]
            if i == 0:
                return

    async def _more(self) -> None:
        if self.conn.eof:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
        await self.conn.wait()

    async def aclose(self) -> None:
        if self.done and self.keep_alive and self.conn.usable:
            self.pool._release(self.key, self.conn)
        else:
            self.conn.close()


def _parse_head(raw: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    """A response head's status (100-599) and headers; RemoteProtocolError for what h11 refuses too."""
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    try:
        status = int(parts[1]) if parts[1].isdigit() else -1
    except IndexError:
        status = -1
    if not 100 <= status <= 599:
        raise httpx.RemoteProtocolError(f"bad HTTP status line {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        k, sep, v = line.partition(b":")
        if not sep:
            continue
        value = v.strip()
        if any((c < 0x20 and c != 0x09) or c == 0x7F for c in value):
            raise httpx.RemoteProtocolError(f"a control character in the {k.strip()[:40]!r} header")
        headers.append((k.strip(), value))
    return status, headers


def _framing(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[bool, int | None, bool]:
    """How the body ends: (chunked, its Content-Length, close after it). A HEAD's answer, a 1xx, 204 or
    304 has none (read as one, the reply hung until the read timeout); a bad Content-Length is refused."""
    h = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
    close = h.get("connection", "").lower() == "close"
    if method == "HEAD" or status < 200 or status in (204, 304):
        return False, 0, close
    if "chunked" in h.get("transfer-encoding", "").lower():
        return True, None, close
    declared = h.get("content-length")
    if declared is None:
        return False, None, close
    if not declared.strip().isdigit() or len(declared.strip()) > 18:
        raise httpx.RemoteProtocolError(f"bad Content-Length {declared[:40]!r}")
    return False, int(declared), close


def _refused(exc: OSError) -> ConnectionRefusedError | None:
    """Every address of the host refused the connection (nothing listens at the port: a server stopped
    or not up yet; nothing was sent, so a retry is safe): the ConnectError's cause says so. asyncio
    words refusals at several addresses (``localhost``: ::1 and 127.0.0.1) as one plain OSError."""
    if isinstance(exc, ConnectionRefusedError):
        return exc
    codes = re.findall(r"\[Errno (\d+)\]", str(exc)) if str(exc).startswith("Multiple exceptions") else []
    if codes and all(int(code) == errno.ECONNREFUSED for code in codes):
        return ConnectionRefusedError(errno.ECONNREFUSED, str(exc))
    return None


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 (http and https) with keep-alive pooling; no compression, no HTTP/2, no proxies."""

    def __init__(self, most_idle: int = MOST, idle_expiry_s: float = EXPIRY_S) -> None:
        self._idle: IdlePool[_Conn] = IdlePool(most_idle, idle_expiry_s)  # capped, expiring (idlepool.py)
        self._ssl: ssl.SSLContext | None = None

    def _release(self, key: tuple[str, str, int], conn: _Conn) -> None:
        conn.timeout = None
        self._idle.put(key, conn)

    async def _connect(self, key: tuple[str, str, int], timeout: float | None) -> _Conn:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {}
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            kwargs = {"ssl": self._ssl, "server_hostname": host}
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(lambda: _Conn(loop), host, port, **kwargs), timeout
            )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or "the connection could not be made") from _refused(exc) or exc
        return proto

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, url.host, port)
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        head = [f"{request.method} ".encode() + url.raw_path + b" HTTP/1.1\r\n"]
        for k, v in request.headers.raw:
            head.append(k + b": " + v + b"\r\n")
        head.append(b"\r\n")
        payload = b"".join(head) + body
        for attempt in range(2):
            # the second try connects afresh: another pooled connection may be as stale as the first
            conn = self._idle.take(key) if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key, timeouts.get("connect"))
            assert conn.transport is not None
            conn.timeout = timeouts.get("read")
            conn.last = conn.loop.time()
            conn.answered = False
            conn.transport.write(payload)
            try:
                status, headers = await self._read_head(conn)
                framing = _framing(request.method, status, headers)
            except httpx.RemoteProtocolError:
                conn.close()
                if reused and attempt == 0 and not conn.answered:
                    continue  # a stale keep-alive connection (closed, nothing sent): once more, fresh
                raise  # it did answer, wrongly: the request is not sent twice
            except BaseException:
                conn.close()
                raise
            return httpx.Response(
                status_code=status,
                headers=headers,
                stream=_Body(self, key, conn, framing),
                extensions={"http_version": b"HTTP/1.1"},
            )
        raise httpx.RemoteProtocolError("server disconnected without sending a response")  # pragma: no cover

    async def _read_head(self, conn: _Conn) -> tuple[int, list[tuple[bytes, bytes]]]:
        """The final status and headers: interim 1xx heads skipped (at most ``_INTERIM_CAP`` of them)."""
        for _ in range(_INTERIM_CAP):
            status, headers = _parse_head(await self._head_bytes(conn))
            if not 100 <= status < 200 or status == 101:
                return status, headers
        raise httpx.RemoteProtocolError(f"over {_INTERIM_CAP} interim (1xx) responses: not an HTTP server?")

    async def _head_bytes(self, conn: _Conn) -> bytes:
        while True:
            i = conn.buf.find(b"\r\n\r\n")
            if i >= 0:
                break
            if len(conn.buf) > _HEAD_CAP:
                raise httpx.RemoteProtocolError(
                    "the response head is longer than 64 KiB (not an HTTP server?)"
                )
            if conn.eof:
                raise httpx.RemoteProtocolError("server disconnected without sending a response")
            await conn.wait()
        raw = bytes(conn.buf[:i])
        del conn.buf[: i + 4]
        return raw

    async def aclose(self) -> None:
        self._idle.close()
