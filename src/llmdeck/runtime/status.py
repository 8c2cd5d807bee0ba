"""A server's live state as seen now: ready, starting, unhealthy, dead — or stale, when its pid
now belongs to another program (the record outlived the server; nothing is signalled then)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import httpx
from pydantic import BaseModel, field_serializer

from llmdeck.runtime.launcher import engine_log, owner
from llmdeck.runtime.state import ServerRecord
from llmdeck.util.redact import redact_text, redact_url

ServerState = Literal["ready", "starting", "unhealthy", "dead", "stale"]


class ServerStatus(BaseModel):
    """A server's live state as seen now."""

    name: str
    state: ServerState
    engine: str
    model: str
    served_model_name: str
    base_url: str
    port: int
    pid: int | None
    uptime_s: float | None
    log_path: str
    metrics: dict[str, float] | None = None
    log_tail: str | None = None
    note: str | None = None

    @field_serializer("log_tail")
    def _tail_out(self, tail: str | None) -> str | None:
        return redact_text(tail) if tail else tail

    @field_serializer("base_url")
    def _url_out(self, url: str) -> str:
        return redact_url(url)


def probe_state(record: ServerRecord) -> ServerState:
    who = owner(record)
    if who == "gone":
        return "dead"
    if who == "other":
        return "stale"
    from llmdeck.util.http import BodyTooLarge, NotAnswering, Redirected, bounded_get

    try:  # bounded as a whole: a trickling /health cannot hold `status`
        status, _ = bounded_get(f"{record.base_url}/health", limit=3.0)
    except (httpx.HTTPError, NotAnswering, BodyTooLarge, Redirected):
        return "starting" if record.ready_at is None else "unhealthy"
    if status == 200:
        return "ready"
    return "unhealthy"


def scrape_live_metrics(base_url: str, limit_s: float = 5.0) -> dict[str, float] | None:
    """Running/waiting requests and KV-cache usage (0-1) from ``/metrics``, summed over engines.

    vLLM, SGLang and llama.cpp names are understood (llmdeck.client.prom); None when the server
    exposes no metrics. A missing value means "not reported", never zero.
    """
    from llmdeck.client.prom import parse_metrics
    from llmdeck.util.http import METRICS_CAP, BodyTooLarge, NotAnswering, Redirected, bounded_get

    try:
        status, body = bounded_get(f"{base_url}/metrics", limit=limit_s, cap=METRICS_CAP)
    except (httpx.HTTPError, NotAnswering, BodyTooLarge, Redirected):
        return None
    if status != 200:
        return None
    values = parse_metrics(body.decode("utf-8", "replace")).values
    out: dict[str, float] = {k: values[k] for k in ("running", "waiting", "kv_usage") if k in values}
    return out or None


def server_status(record: ServerRecord, *, with_metrics: bool = True) -> ServerStatus:
    state = probe_state(record)
    live = state not in {"dead", "stale"}
    uptime = (datetime.now(UTC) - record.started_at).total_seconds() if live else None
    metrics = scrape_live_metrics(record.base_url) if with_metrics and state == "ready" else None
    tail = None
    note = None
    if state == "dead":
        from llmdeck.errors import LlmdeckError
        from llmdeck.runtime.diagnosis import log_tail

        try:
            tail = redact_text(log_tail(engine_log(record), 20))
        except LlmdeckError as exc:  # one unreadable log (a folder, another user's) no longer hides the rest
            note = f"Its log cannot be read: {exc.message}"
    if state == "stale":
        note = (
            f"The record is stale: pid {record.pid} now belongs to another program, not the server "
            f"llmdeck started; it will not be signalled. `llmdeck down {record.name}` forgets the record."
        )
    return ServerStatus(
        name=record.name,
        state=state,
        engine=record.spec.engine,
        model=record.spec.model,
        served_model_name=record.served_model_name,
        base_url=record.base_url,
        port=record.port,
        pid=record.pid,
        uptime_s=uptime,
        log_path=str(record.log_path),
        metrics=metrics,
        log_tail=tail,
        note=note,
    )
