"""llmdeck's lean HTTP/1.1 transport (client/transport.py) against a TINY FAKE upstream that floods an
event stream as fast as it can (tests/gateway_fakes.py)."""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from gateway_fakes import FakeOpenAIUpstream, UvicornThread
from llmdeck.client.transport import LeanTransport


def test_a_reader_that_falls_behind_a_flood_holds_a_bounded_buffer() -> None:
    """Reading never paused: the gateway relaying a fast backend to a slow client piled the whole reply
    up in memory (hundreds of MB a second), and the relay loop that drained it did not see the client's
    hang-up for seconds (the flaky flood test). Now reading pauses past 1 MiB and resumes when
    the reader wants more."""
    up = FakeOpenAIUpstream(mode="flood")

    async def read_slowly(url: str) -> tuple[int, int]:
        async with httpx.AsyncClient(transport=LeanTransport(), timeout=10) as client:
            body = {"model": "a", "messages": [], "stream": True}
            async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
                chunks = r.aiter_raw()
                await anext(chunks)
                await asyncio.sleep(1.0)  # the reader falls behind
                held = len(r.stream._stream.conn.buf)  # type: ignore[attr-defined]
                got = 0
                for _ in range(200):  # it reads on: reading resumes
                    got += len(await anext(chunks))
                return held, got

    with UvicornThread(up.app) as server:
        held, got = asyncio.run(read_slowly(server.url))
    assert held <= 2 << 20  # the 1 MiB mark and one read past it at most
    assert got > 0


def test_a_wrong_answer_on_a_reused_connection_is_not_sent_again() -> None:
    """Only a keep-alive connection closed before a byte of the answer is retried (the request never
    reached a live server); one that answered wrongly had had its POST sent a second time."""
    import socket
    import threading

    requests: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:  # a TINY FAKE: one keep-alive connection; a good answer, then a bad head
        conn, _ = listener.accept()
        with conn:
            for reply in (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", b"HTTP/1.1 999 Odd\r\n\r\n"):
                requests.append(conn.recv(65536))
                conn.sendall(reply)
        with contextlib.suppress(OSError):
            listener.settimeout(2)
            extra, _ = listener.accept()  # a retry would come here
            requests.append(extra.recv(65536))
            extra.close()

    async def two_posts() -> str:
        async with httpx.AsyncClient(transport=LeanTransport(), timeout=5) as client:
            assert (await client.post(f"http://127.0.0.1:{port}/x", content=b"a")).status_code == 200
            try:
                await client.post(f"http://127.0.0.1:{port}/x", content=b"b")
            except httpx.RemoteProtocolError as exc:
                return str(exc)
            return "no error"

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    said = asyncio.run(two_posts())
    thread.join(5)
    listener.close()
    assert "bad HTTP status line" in said and len(requests) == 2


def test_a_refused_connection_says_so_at_every_address() -> None:
    """The gateway sends a request again only when its connection was refused (nothing was sent): the
    ConnectError's cause says so, also where asyncio words refusals at several addresses (``localhost``:
    ::1 and 127.0.0.1) as one plain OSError; another failure to connect does not."""
    import errno

    from llmdeck.client.transport import _refused
    from llmdeck.util.net import free_port

    async def connect(url: str) -> BaseException:
        async with httpx.AsyncClient(transport=LeanTransport(), timeout=5) as client:
            try:
                await client.get(url)
            except httpx.ConnectError as exc:
                return exc
        raise AssertionError("connected")

    for host in ("127.0.0.1", "localhost"):
        exc = asyncio.run(connect(f"http://{host}:{free_port()}/v1/models"))
        assert isinstance(exc.__cause__, ConnectionRefusedError), (host, exc.__cause__)
    both = OSError(
        "Multiple exceptions: [Errno 111] Connect call failed ('::1', 9, 0, 0), "
        "[Errno 111] Connect call failed ('127.0.0.1', 9)"
    )
    assert isinstance(_refused(both), ConnectionRefusedError)
    mixed = OSError(
        "Multiple exceptions: [Errno 99] Cannot assign requested address, "
        "[Errno 111] Connect call failed ('127.0.0.1', 9)"
    )
    assert _refused(mixed) is None and _refused(OSError(errno.EHOSTUNREACH, "No route to host")) is None
