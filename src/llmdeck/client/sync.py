"""Small synchronous helpers for other modules (checks, quickstart, connect)."""

from __future__ import annotations

from typing import Any

import httpx

from llmdeck.client.errors import ClientEndpointError, MalformedStreamError, http_status_error, model_entries
from llmdeck.client.httpmap import _headers, _map_httpx_errors


def _sync_get(base_url: str, path: str, api_key: str | None, timeout_s: float) -> httpx.Response:
    url = base_url.rstrip("/") + path
    with _map_httpx_errors(url), httpx.Client(timeout=timeout_s, headers=_headers(api_key)) as http:
        return http.get(url)


def get_models(base_url: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """``GET {base_url}/v1/models`` -> the list of model objects. Raises ClientEndpointError."""
    url = base_url.rstrip("/") + "/v1/models"
    resp = _sync_get(base_url, "/v1/models", api_key, timeout_s)
    if resp.status_code != 200:
        raise http_status_error(url, resp.status_code, resp.text)
    try:
        data = resp.json()
    except ValueError as exc:
        raise MalformedStreamError(
            f"{url} did not answer JSON: {resp.text[:200]!r}",
            url=url,
            hint="Check that the URL points at an OpenAI-compatible server (e.g. vLLM).",
        ) from exc
    return model_entries(data, url)


def health(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> bool:
    """True when ``GET {base_url}/health`` answers 200; False when unreachable or not healthy."""
    try:
        return _sync_get(base_url, "/health", api_key, timeout_s).status_code == 200
    except ClientEndpointError:
        return False


def server_version(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> str | None:
    """The server's version from ``GET /version`` (vLLM), or None when it does not say."""
    try:
        resp = _sync_get(base_url, "/version", api_key, timeout_s)
        v = resp.json().get("version") if resp.status_code == 200 else None
    except (ClientEndpointError, ValueError, AttributeError):
        return None
    return str(v) if v is not None else None
