"""A GET bounded as a whole: a peer that accepts and never answers, or trickles a byte now and then,
cannot hold it past ``limit`` seconds (httpx's own timeouts bound only the gap between reads)."""

from __future__ import annotations

import time

import httpx


class NotAnswering(Exception):
    """No complete reply within the limit."""


def bounded_get(url: str, *, limit: float, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """``(status, body)`` of ``GET url``; NotAnswering after ``limit`` s; httpx errors pass through."""
    until = time.monotonic() + limit
    body = b""
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(limit), follow_redirects=True) as client,
            client.stream("GET", url, headers=headers or {}) as resp,
        ):
            for chunk in resp.iter_bytes():
                body += chunk
                if time.monotonic() > until:
                    raise NotAnswering(url)
                if len(body) > 1 << 20:  # enough to know it answers
                    break
            return resp.status_code, body
    except httpx.TimeoutException as exc:
        if isinstance(exc, httpx.ConnectTimeout):
            raise
        raise NotAnswering(url) from exc
