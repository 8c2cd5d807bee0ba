"""`llmdeck status URL`: the live state of any OpenAI-compatible server, asked with bounded requests.

Three questions (/health, /v1/models, /metrics), each bounded as a whole, so a silent or trickling
server is reported as "not answering" in seconds; nothing a server sends can crash the answer.
"""

from __future__ import annotations

from typing import Literal

import httpx
from pydantic import BaseModel, Field

from llmdeck.util.http import JSON_CAP, METRICS_CAP, BodyTooLarge, NotAnswering, Redirected, bounded_get
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.net import tls_problem

UrlState = Literal[
    "ready", "unhealthy", "needs_api_key", "not_openai", "bad_reply", "not_answering", "unreachable"
]


class UrlStatus(BaseModel):
    """What a server at a URL answered (``--json`` prints this)."""

    base_url: str
    state: UrlState
    detail: str
    models: list[str] = Field(default_factory=list)
    max_model_len: int | None = None
    metrics: dict[str, float] | None = None


_WORDS = {
    "unreachable": "nothing accepts connections there",
    "not_openai": "the peer does not speak HTTP (it closed the connection or sent junk)",
}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _ask(
    base: str, path: str, limit: float, api_key: str | None, cap: int = JSON_CAP
) -> tuple[int, bytes] | UrlStatus:
    """``(status, body)`` of ``GET base+path``, or the state (with its detail) when there is no usable
    HTTP answer: silent, trickling, endless, redirected away, not HTTP at all."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        return bounded_get(base + path, limit=limit, headers=headers, cap=cap)
    except NotAnswering:
        detail = f"accepted the connection but sent no complete reply to GET {path} within {limit:g} s"
        return UrlStatus(base_url=base, state="not_answering", detail=detail)
    except (BodyTooLarge, Redirected) as exc:  # answered, but not as an OpenAI server does
        return UrlStatus(base_url=base, state="not_openai", detail=_lower_first(exc.message.rstrip(".")))
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        detail = tls_problem(exc) or _WORDS["unreachable"]
        return UrlStatus(base_url=base, state="unreachable", detail=detail)
    except httpx.HTTPError:
        return UrlStatus(base_url=base, state="not_openai", detail=_WORDS["not_openai"])


def url_status(base_url: str, *, api_key: str | None = None, limit: float = 10.0) -> UrlStatus:
    """Ask the server at ``base_url`` (no /v1) how it is; never raises for what the server does."""
    health = _ask(base_url, "/health", limit, None)
    if isinstance(health, UrlStatus):
        return health
    models = _ask(base_url, "/v1/models", limit, api_key)
    if isinstance(models, UrlStatus):
        return models
    if models[0] in (401, 403):
        return UrlStatus(base_url=base_url, state="needs_api_key", detail=f"/v1/models answered {models[0]}")
    out = _parse_models(base_url, models)
    if out.state == "ready" and health[0] != 200:
        out.state, out.detail = "unhealthy", f"/health answered HTTP {health[0]}"
    if out.state == "ready":
        out.metrics = _metrics(base_url, limit)
    return out


def _parse_models(base_url: str, reply: tuple[int, bytes]) -> UrlStatus:
    status, body = reply
    try:
        data = json_loads(body.decode("utf-8"))
    except ValueError:
        data = None
    items = data.get("data") if isinstance(data, dict) else None
    listed = items if isinstance(items, list) else []  # {"data": 5} had been an internal error
    ids = [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
    if status != 200 or not isinstance(items, list) or not ids:
        busy = " (overloaded or rate-limiting: try again later)" if status in (429, 503) else ""
        what = f"HTTP {status}{busy}" if status != 200 else f"{body[:120].decode('utf-8', 'replace')!r}"
        return UrlStatus(
            base_url=base_url, state="not_openai", detail=f"/v1/models answered {what}, not a model list"
        )
    first = next(m for m in items if isinstance(m, dict) and m.get("id") == ids[0])
    from llmdeck.client.errors import MalformedStreamError, reported_max_model_len
    from llmdeck.util.redact import redact_url

    try:  # an impossible one is not shown as if true (see reported_max_model_len)
        mml = reported_max_model_len(first, redact_url(base_url) + "/v1/models")
    except MalformedStreamError as exc:
        return UrlStatus(base_url=base_url, state="bad_reply", detail=exc.message.rstrip("."), models=ids)
    return UrlStatus(
        base_url=base_url, state="ready", detail=f"serves {len(ids)} model(s)", models=ids, max_model_len=mml
    )


def _metrics(base_url: str, limit: float) -> dict[str, float] | None:
    from llmdeck.client.prom import parse_metrics

    reply = _ask(base_url, "/metrics", limit, None, cap=METRICS_CAP)
    if isinstance(reply, UrlStatus) or reply[0] != 200:
        return None
    values = parse_metrics(reply[1].decode("utf-8", "replace")).values
    return {k: values[k] for k in ("running", "waiting", "kv_usage") if k in values} or None
