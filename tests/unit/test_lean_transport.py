"""llmdeck's lean HTTP/1.1 transport (client/transport.py) against a TINY FAKE upstream that floods an
event stream as fast as it can (tests/gateway_fakes.py)."""

from __future__ import annotations

import asyncio

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
