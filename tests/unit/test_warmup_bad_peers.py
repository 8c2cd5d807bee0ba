"""`up --warmup`'s requests (llmdeck.runtime.warmup) against misbehaving servers (tests/fake_servers.py):
each request bounded as a whole and its reply checked, so a bad engine makes failed warm-up requests in
the report, never a hang, a traceback or token counts no server can have."""

from __future__ import annotations

import asyncio
import time

from fake_servers import running
from llmdeck.runtime.warmup import WarmupReport, warmup


def _warm(url: str, timeout_s: float) -> WarmupReport:
    run = warmup(url, "fake", max_model_len=256, lengths=[64], repeats=1, timeout_s=timeout_s)
    return asyncio.run(asyncio.wait_for(run, 60))


def test_a_stream_that_never_ends_is_cut_at_the_timeout() -> None:
    """SSE comments for ever: every read returned in time, so the request (and `up`) had waited for ever."""
    with running("fake_trickle_stream_server") as url:
        t0 = time.monotonic()
        report = _warm(url, 1.0)
    assert time.monotonic() - t0 < 30
    assert report.requests and not any(r.ok for r in report.requests)
    assert all("no whole reply in time" in (r.error or "") for r in report.requests)


def test_replies_of_the_wrong_shape_are_failed_requests_not_a_traceback() -> None:
    """A /version that is a JSON list raised AttributeError out of warmup(); usage of -5 tokens was
    recorded as the request's prompt_tokens."""
    with running("fake_bad_usage_server") as url:
        report = _warm(url, 10.0)
    assert report.server_version is None
    assert report.requests and not any(r.ok for r in report.requests)
    assert all("whole number of tokens" in (r.error or "") for r in report.requests)
    assert all(r.prompt_tokens is None for r in report.requests)


def test_a_peer_that_hangs_up_is_said_in_words_not_a_python_class() -> None:
    """A server that closes without a reply: the request's error had read "ReadError: no whole reply in
    time" (httpx's class name in the warm-up report, and a timeout that was none)."""
    with running("fake_closing_server") as url:
        report = _warm(url, 10.0)
    assert report.requests and not any(r.ok for r in report.requests)
    for r in report.requests:
        assert r.error and "Error" not in r.error and "in time" not in r.error, r.error
        assert "connection" in r.error or "disconnected" in r.error, r.error
