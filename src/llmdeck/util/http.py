"""Bounded HTTP reading, shared by every client in llmdeck.

* :func:`bounded_get`: a GET bounded as a whole: a peer that accepts and never answers, or trickles a
  byte now and then, cannot hold it past ``limit`` seconds (httpx's own timeouts bound only the gap
  between reads), and an endless body cannot fill the memory (``cap`` bytes at most).
* :func:`capped_chunks`, :func:`read_capped` / :func:`aread_capped`: a response body, at most ``cap``
  bytes (and, for the sync ones, until a monotonic deadline): :class:`BodyTooLarge` beyond.
* :func:`capped_lines`: the lines of a stream (SSE), none longer than ``line_cap``.
* :func:`raise_for_redirect`: a 3xx with a ``Location`` is :class:`Redirected` (where to, redacted).
* :func:`plain_body`: a body as sent, never inflated (``IDENTITY`` asks for that): :class:`Compressed`
  for a reply that is compressed all the same.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING

from llmdeck.errors import EndpointError, InternalError

if TYPE_CHECKING:
    import httpx

MIB = 1 << 20
JSON_CAP = 8 * MIB  # /v1/models, chat replies, /health, /version, the hub's API JSON
METRICS_CAP = 16 * MIB  # a Prometheus page (vLLM's is ~100 KB)
SSE_LINE_CAP = 4 * MIB  # one line of an event stream
STREAM_CAP = 64 * MIB  # a whole streamed reply the checks keep in memory
MAX_REDIRECTS = 5
IDENTITY = {"Accept-Encoding": "identity"}  # every body llmdeck caps is read as sent, never inflated
OPENAI_SERVER = "an OpenAI-compatible server"


class NotAnswering(InternalError):
    """No complete reply within the limit (``str()`` is the URL; callers say what it means)."""


def _split(url: str) -> tuple[str, str]:
    """``http://h:1/v1/models?x`` -> ``("http://h:1", "/v1/models")`` (for messages only)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, ""
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host}", slash + path.split("?", 1)[0]


def _mib(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n} bytes"


class BodyTooLarge(EndpointError):
    """The peer sent more than the cap (an endless or huge body, or one endless stream line)."""

    def __init__(self, url: str, cap: int, *, what: str = OPENAI_SERVER, line: bool = False) -> None:
        origin, path = _split(url)
        sent = f"a line longer than {_mib(cap)}" if line else f"more than {_mib(cap)}"
        super().__init__(
            f"The server at {origin} sent {sent} for {path or '/'}; is it {what}? llmdeck stopped reading.",
            hint="Check the URL and port: they should point at the server itself (e.g. "
            "http://127.0.0.1:8000), not at a file server, a proxy or another service.",
        )
        self.what = what
        self.url = url
        self.cap = cap


class Compressed(BodyTooLarge):
    """The peer compressed its reply though llmdeck asked for none: not inflated, since a few KB of gzip
    inside gzip inflate to gigabytes in one piece, before a cap could count them."""

    def __init__(self, url: str, encoding: str, *, what: str = OPENAI_SERVER) -> None:
        super().__init__(url, 0, what=what)
        origin, path = _split(url)
        self.message = (
            f"The server at {origin} sent its {path or '/'} answer compressed (Content-Encoding: "
            f"{shown_location(encoding)}) though llmdeck asked for none; is it {what}? llmdeck did not "
            "inflate it."
        )
        self.args = (self.message,)


def plain_body(resp: httpx.Response, url: str, *, what: str = "") -> None:
    """Compressed for a reply with a Content-Encoding (other than identity): called before its body is
    read, so that httpx's ``iter_bytes`` inflates nothing."""
    encoding = resp.headers.get("content-encoding", "").strip()
    if encoding.lower() not in ("", "identity"):
        raise Compressed(url, encoding, what=what or OPENAI_SERVER)


def shown_location(location: str) -> str:
    """A peer's Location header as it may be shown: secrets redacted, no control characters, short."""
    from llmdeck.util.redact import redact_text, redact_url

    text = redact_text(redact_url(location.strip()))
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text[:200] + ("…" if len(text) > 200 else "")


class Redirected(EndpointError):
    """The server redirected to a URL that is not http(s), too often (a loop), or to a host that accepts
    no connection."""

    def __init__(self, url: str, location: str, *, why: str) -> None:
        origin, path = _split(url)
        super().__init__(
            f"The server at {origin} redirected {path or '/'} to {shown_location(location)!r} ({why}).",
            hint="An OpenAI-compatible server answers directly: if the redirect points at the real "
            "server, give llmdeck that URL; otherwise something in front of it (a proxy, a login page) "
            "answers instead: use the server's own host and port.",
        )
        self.url = url
        self.location = location


def capped_chunks(
    chunks: Iterable[bytes], url: str, *, cap: int = JSON_CAP, until: float | None = None, what: str = ""
) -> Iterator[bytes]:
    """The chunks as they come: BodyTooLarge past ``cap`` bytes in all, NotAnswering once ``until``
    (monotonic) passes, however slowly or quickly they come."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > cap:
            raise BodyTooLarge(url, cap, what=what or OPENAI_SERVER)
        if until is not None and time.monotonic() > until:
            raise NotAnswering(url)
        yield chunk


def read_capped(
    chunks: Iterable[bytes], url: str, *, cap: int = JSON_CAP, until: float | None = None, what: str = ""
) -> bytes:
    """The whole body: BodyTooLarge past ``cap`` bytes; NotAnswering once ``until`` (monotonic) passes."""
    return b"".join(capped_chunks(chunks, url, cap=cap, until=until, what=what))


async def aread_capped(resp: httpx.Response, url: str, *, cap: int = JSON_CAP, what: str = "") -> bytes:
    """An async response's whole body (bound the time with ``asyncio.timeout``), BodyTooLarge past ``cap``,
    Compressed for a compressed one (send ``IDENTITY``)."""
    plain_body(resp, url, what=what)
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        if len(buf) > cap:
            raise BodyTooLarge(url, cap, what=what or OPENAI_SERVER)
    return bytes(buf)


def capped_lines(chunks: Iterable[bytes], url: str, *, line_cap: int = SSE_LINE_CAP) -> Iterator[bytes]:
    """The lines of a byte stream (without ``\\n``; a last unterminated one too), BodyTooLarge for a
    line longer than ``line_cap``."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines
        if len(pending) > line_cap:
            raise BodyTooLarge(url, line_cap, line=True)
    if pending:
        yield pending


async def capped_alines(
    resp: httpx.Response, url: str, *, line_cap: int = SSE_LINE_CAP
) -> AsyncIterator[bytes]:
    """``capped_lines`` of an async response (Compressed for a compressed one)."""
    plain_body(resp, url)
    pending = b""
    async for chunk in resp.aiter_bytes():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r")
        if len(pending) > line_cap:
            raise BodyTooLarge(url, line_cap, line=True)
    if pending:
        yield pending


def raise_for_redirect(
    resp: httpx.Response, url: str, *, why: str = "llmdeck follows no redirect here"
) -> None:
    """Redirected for a 3xx answer that names a Location; nothing otherwise."""
    location = resp.headers.get("location")
    if 300 <= resp.status_code < 400 and location:
        raise Redirected(url, location, why=why)


def _next_hop(resp: httpx.Response, url: str, hops: int) -> str | None:
    """The URL a redirect leads to (None when ``resp`` is no redirect); Redirected for a bad one."""
    location = resp.headers.get("location")
    if not (300 <= resp.status_code < 400 and location):
        return None
    try:
        target = resp.url.join(location)
    except Exception as exc:  # httpx.InvalidURL and friends: a Location that is no URL
        raise Redirected(url, location, why="to something that is not a URL") from exc
    if target.scheme not in {"http", "https"}:
        raise Redirected(url, location, why="to a URL that is not http(s), which llmdeck never follows")
    if hops >= MAX_REDIRECTS:
        raise Redirected(url, location, why=f"more than {MAX_REDIRECTS} times: a redirect loop?")
    return str(target)


def bounded_get(
    url: str, *, limit: float, headers: dict[str, str] | None = None, cap: int = JSON_CAP, what: str = ""
) -> tuple[int, bytes]:
    """``(status, body)`` of ``GET url``: NotAnswering after ``limit`` s, BodyTooLarge past ``cap`` bytes,
    Redirected for a redirect to a non-http(s) URL, a loop, or a host that accepts no connection (http(s)
    ones are followed, the key only on the same origin); other httpx errors pass through."""
    import httpx

    from llmdeck.util.deadline import deadline_transport

    until = time.monotonic() + limit
    current, sent = url, {**IDENTITY, **(headers or {})}
    try:  # the transport bounds the status line and headers too (a peer trickling them byte by byte)
        with httpx.Client(
            timeout=httpx.Timeout(limit), follow_redirects=False, transport=deadline_transport()
        ) as client:
            for hops in range(MAX_REDIRECTS + 1):
                with client.stream("GET", current, headers=sent) as resp:
                    nxt = _next_hop(resp, url, hops)
                    if nxt is None:
                        plain_body(resp, current, what=what)
                        return resp.status_code, read_capped(
                            resp.iter_bytes(), current, cap=cap, until=until, what=what
                        )
                if _split(nxt)[0] != _split(current)[0]:
                    sent = {k: v for k, v in sent.items() if k.lower() != "authorization"}
                current = nxt
                if time.monotonic() > until:
                    raise NotAnswering(url)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        if current != url:  # the first server answered; where it sent us accepts no connection
            raise Redirected(url, current, why="where nothing accepts connections") from exc
        raise
    except httpx.TimeoutException as exc:
        raise NotAnswering(url) from exc
    raise AssertionError("unreachable")  # pragma: no cover  (the loop returns or raises)


def failure_words(exc: BaseException, path: str, timeout_s: float, shape: str) -> str:
    """Why GET ``path`` gave no usable answer, in words (status lines and 503s show it; no exception
    class names): ``shape`` is what the answer should have been ("an OpenAI models list (JSON)")."""
    import httpx

    if isinstance(exc, TimeoutError | httpx.TimeoutException | NotAnswering):
        return f"no answer to {path} within {timeout_s:g} s"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{path} answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx.ConnectError):
        return "cannot connect (nothing listens there, or the host is unreachable)"
    if isinstance(exc, Compressed):
        return f"its {path} answer came compressed, which llmdeck does not inflate"
    if isinstance(exc, BodyTooLarge):
        return f"its {path} answer was over the size cap"
    if isinstance(exc, ValueError | AttributeError):
        return f"{path} did not answer {shape}"
    return "the connection broke"
