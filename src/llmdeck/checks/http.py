"""A thin httpx wrapper that keeps trimmed evidence of every exchange."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmdeck.checks.results import Exchange
from llmdeck.checks.surfaces import chunk_deltas
from llmdeck.errors import EndpointError
from llmdeck.util.http import (
    IDENTITY,
    JSON_CAP,
    STREAM_CAP,
    capped_chunks,
    capped_lines,
    plain_body,
    raise_for_redirect,
)
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.net import connect_failure

TRIM = 600


def trim(text: str | None, limit: int = TRIM) -> str | None:
    if text is None:
        return None
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more chars]"


def _dump(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def summarize_body(body: Any) -> Any:
    """A copy of a request body with long prompts shortened (evidence, not a replay)."""
    if isinstance(body, dict):
        out: dict[str, Any] = {}
        for key, value in body.items():
            if key == "prompt" and isinstance(value, list) and len(value) > 8:
                out[key] = f"<{len(value)} token ids>"
            elif isinstance(value, str) and len(value) > 200:
                out[key] = value[:80] + f"… <{len(value)} chars>"
            else:
                out[key] = summarize_body(value)
        return out
    if isinstance(body, list):
        return [summarize_body(v) for v in body]
    return body


@dataclass
class Reply:
    status_code: int
    text: str
    exchange: Exchange
    data: Any = None
    chunks: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    stalled_s: float | None = None  # the stream began, then sent nothing more within the limit

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300

    def deltas(self) -> Iterator[dict[str, Any]]:
        """The streamed chunks' deltas that are objects (see :func:`chunk_deltas`)."""
        return chunk_deltas(self.chunks)

    def stream_usage(self) -> dict[str, Any] | None:
        """The last streamed ``usage`` object, if any."""
        return next((c["usage"] for c in reversed(self.chunks) if isinstance(c.get("usage"), dict)), None)

    def error_message(self) -> str:
        """vLLM's error text: ``{"error": {"message": ...}}`` (or older ``{"message": ...}``)."""
        data = self.data
        if isinstance(data, dict):
            err = data.get("error")
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return str(err["message"])
            if isinstance(data.get("message"), str):
                return str(data["message"])
            if isinstance(data.get("detail"), str):
                return str(data["detail"])
        return self.text.strip()[:300]


class DeadlinePassed(EndpointError):
    """The check's overall deadline passed; the probes not run yet are skipped."""


class Http:
    """Requests to one server, each recorded as an :class:`Exchange`.

    Every request is bounded as a whole (not only between bytes): by its own ``timeout`` and by the
    overall ``deadline_s`` of the check, so a server that trickles a byte now and then cannot hold a
    probe, and a silent one cannot hold the check, for longer than that.
    """

    def __init__(
        self, base_url: str, api_key: str | None, timeout: float = 60.0, deadline_s: float | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s if deadline_s is not None else None
        from llmdeck.util.deadline import deadline_transport  # headers trickled byte by byte too

        self.client = httpx.Client(
            base_url=self.base_url, headers=IDENTITY, timeout=timeout, transport=deadline_transport()
        )

    def close(self) -> None:
        self.client.close()

    def headers(self, api_key: str | bool | None = True) -> dict[str, str]:
        """Auth header: ``True`` = the configured key, ``False``/None = none, a str = that key."""
        key = self.api_key if api_key is True else (api_key or None)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _unreachable(self, exc: Exception) -> EndpointError:
        return EndpointError(
            f"The server at {self.base_url} is not reachable "
            f"({connect_failure(exc) or 'no connection could be made'}).",
            hint="Start one with `llmdeck up --model <dir>` (or `vllm serve ...`), check the host and "
            "port, then run the check again; `llmdeck status` lists the servers llmdeck started.",
        )

    def deadline_passed(self) -> str | None:
        """What to say when the check's deadline has passed (a request it cut short), else None."""
        if self.deadline is None or time.monotonic() < self.deadline - 0.05:
            return None
        return f"The check of {self.base_url} did not finish within its {self.deadline_s:g} s deadline"

    def _limit(self, timeout: float | None) -> float:
        """Seconds this request may take: its timeout, cut to what is left of the deadline."""
        limit = timeout if timeout is not None else self.timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise DeadlinePassed(
                    f"The check of {self.base_url} did not finish within its {self.deadline_s:g} s deadline.",
                    hint="The server answers slowly or not at all; check its log, or raise --deadline.",
                )
            limit = min(limit, left)
        return limit

    def _open(self, method: str, path: str, body: Any, api_key: str | bool | None, limit: float) -> Any:
        return self.client.stream(
            method, path, json=body, headers=self.headers(api_key), timeout=httpx.Timeout(limit)
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        api_key: str | bool | None = True,
        timeout: float | None = None,
    ) -> Reply:
        t0 = time.monotonic()
        limit = self._limit(timeout)
        try:
            with self._open(method, path, body, api_key, limit) as resp:
                raise_for_redirect(resp, self.base_url + path)
                raw = b"".join(capped_chunks(_chunks(resp, t0 + limit), self.base_url + path, cap=JSON_CAP))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unreachable(exc) from exc
        seconds = round(time.monotonic() - t0, 3)
        text = raw.decode(resp.encoding or "utf-8", "replace")
        data: Any = None
        try:
            data = json_loads(text) if text.strip() else None
        except ValueError:
            data = None
        ex = Exchange(
            method=method,
            path=path,
            sent=trim(_dump(summarize_body(body))) if body is not None else None,
            status_code=resp.status_code,
            received=trim(text),
            seconds=seconds,
        )
        return Reply(status_code=resp.status_code, text=text, exchange=ex, data=data)

    def stream(
        self, path: str, body: Any, *, timeout: float | None = None, first_only: bool = False
    ) -> Reply:
        """POST with ``stream: true``; collects every SSE ``data:`` chunk and whether ``[DONE]`` came
        (``first_only``: closed at the first chunk, for a request whose whole reply could run long)."""
        t0 = time.monotonic()
        limit = self._limit(timeout)
        chunks: list[dict[str, Any]] = []
        raw_lines: list[str] = []
        done, stalled = False, None
        try:
            with self._open("POST", path, body, True, limit) as resp:
                url = self.base_url + path
                raise_for_redirect(resp, url)
                if resp.status_code >= 300:
                    raw = b"".join(capped_chunks(_chunks(resp, t0 + limit), url, cap=JSON_CAP))
                    text = raw.decode("utf-8", "replace")
                    ex = Exchange(
                        method="POST",
                        path=path,
                        sent=trim(_dump(summarize_body(body))),
                        status_code=resp.status_code,
                        received=trim(text),
                        seconds=round(time.monotonic() - t0, 3),
                    )
                    return Reply(status_code=resp.status_code, text=text, exchange=ex, data=_loads(text))
                body_chunks = capped_chunks(_chunks(resp, t0 + limit), url, cap=STREAM_CAP)
                status = resp.status_code
                try:
                    done = _read_sse(_lines(body_chunks, url), chunks, raw_lines, first_only)
                except httpx.TimeoutException:
                    if not chunks:  # nothing came at all: the probe's timeout handling says so
                        raise
                    stalled = round(time.monotonic() - t0, 1)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unreachable(exc) from exc
        usage_chunk = next((c for c in reversed(chunks) if isinstance(c.get("usage"), dict)), None)
        shown = list(raw_lines[:3])
        if usage_chunk is not None:
            shown.append("… data: " + _dump(usage_chunk))
        if done:
            shown.append("data: [DONE]")
        ex = Exchange(
            method="POST",
            path=path,
            sent=trim(_dump(summarize_body(body))),
            status_code=status,
            received=trim(f"{len(chunks)} chunks; " + "\n".join(shown), 900),
            seconds=round(time.monotonic() - t0, 3),
        )
        return Reply(status_code=status, text="", exchange=ex, chunks=chunks, done=done, stalled_s=stalled)


def _read_sse(
    lines: Iterator[str], chunks: list[dict[str, Any]], raw_lines: list[str], first_only: bool = False
) -> bool:
    """Collect the JSON ``data:`` chunks (and the first three raw lines); True when ``[DONE]`` came
    (``first_only``: stop at the first chunk)."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[len("data:") :].strip()
        if len(raw_lines) < 3 and payload != "[DONE]":
            raw_lines.append(line)
        if payload == "[DONE]":
            return True
        chunk = _loads(payload)
        if isinstance(chunk, dict):
            chunks.append(chunk)
            if first_only:
                return False
    return False


def _loads(text: str) -> Any:
    try:
        return json_loads(text) if text.strip() else None
    except ValueError:
        return None


def _chunks(resp: httpx.Response, until: float) -> Iterator[bytes]:
    """The body's bytes as they come (as sent: Compressed for a compressed one); ReadTimeout once
    ``until`` (monotonic) passes, however they trickle."""
    plain_body(resp, str(resp.request.url))
    for chunk in resp.iter_bytes():
        yield chunk
        if time.monotonic() > until:
            raise httpx.ReadTimeout("the reply did not finish within the request's time limit")


def _lines(chunks: Iterator[bytes], url: str) -> Iterator[str]:
    for line in capped_lines(chunks, url):
        yield line.rstrip(b"\r").decode("utf-8", "replace")
