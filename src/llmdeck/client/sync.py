"""Small synchronous helpers for other modules (checks, quickstart, connect)."""

from __future__ import annotations

from typing import Any

from llmdeck.client.errors import (
    ClientEndpointError,
    MalformedStreamError,
    http_status_error,
    model_entries,
    not_answering,
)
from llmdeck.client.httpmap import _headers, _map_httpx_errors
from llmdeck.util.http import NotAnswering, bounded_get
from llmdeck.util.jsonsafe import loads as json_loads


def _sync_get(base_url: str, path: str, api_key: str | None, timeout_s: float) -> tuple[int, bytes]:
    """``(status, body)``: the body capped (an endless one is ResponseTooLargeError), the whole request
    bounded by ``timeout_s`` (a trickling peer is a StreamTimeoutError), a redirect a RedirectedError."""
    url = base_url.rstrip("/") + path
    try:
        with _map_httpx_errors(url):
            status, body = bounded_get(url, limit=timeout_s, headers=_headers(api_key))
    except NotAnswering as exc:
        raise not_answering(url, timeout_s) from exc
    return status, body


def get_models(base_url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """``GET {base_url}/v1/models`` -> the list of model objects. Raises ClientEndpointError."""
    url = base_url.rstrip("/") + "/v1/models"
    status, body = _sync_get(base_url, "/v1/models", api_key, timeout_s)
    text = body.decode("utf-8", "replace")
    if status != 200:
        raise http_status_error(url, status, text, key_sent=bool(api_key))
    try:
        data = json_loads(text)
    except ValueError as exc:
        raise MalformedStreamError(
            f"{url} did not answer JSON: {text[:200]!r}",
            url=url,
            hint="Check that the URL points at an OpenAI-compatible server (e.g. vLLM).",
        ) from exc
    return model_entries(data, url)


def health(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> bool:
    """True when ``GET {base_url}/health`` answers 200; False when unreachable or not healthy."""
    try:
        return _sync_get(base_url, "/health", api_key, timeout_s)[0] == 200
    except ClientEndpointError:
        return False


def server_version(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> str | None:
    """The server's version from ``GET /version`` (vLLM), or None when it does not say."""
    try:
        status, body = _sync_get(base_url, "/version", api_key, timeout_s)
        v = json_loads(body).get("version") if status == 200 else None
    except (ClientEndpointError, ValueError, AttributeError):
        return None
    return str(v) if v is not None else None
