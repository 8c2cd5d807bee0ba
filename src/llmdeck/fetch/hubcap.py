"""Caps on what huggingface_hub reads while `llmdeck fetch` downloads: an endpoint that answers the
hub's API (a repo's file list) or, with ``--config-only``, a config or tokenizer file with an endless
body is stopped with a :class:`llmdeck.util.http.BodyTooLarge` (exit 1), where huggingface_hub would
read it into memory or onto the disk without end. Weights are never capped.

It hooks the responses of huggingface_hub's shared HTTP client (``set_client_factory``, hub >= 1.0);
with an older hub (requests) nothing is hooked and only the first question (``check_answers``) is
capped."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from llmdeck.util.http import capped_chunks

HUB_JSON_CAP = 16 << 20  # the hub's answer about a repo (a file list): a few KB, a few MB for huge repos
CONFIG_FILE_CAP = 256 << 20  # config.json, tokenizer.json (tens of MB at most), a safetensors index
HUB_WHAT = "a Hugging Face hub or mirror"


def cap_for(path: str, *, config_only: bool) -> int | None:
    """The most bytes a reply for ``path`` may have (None: no cap, e.g. a weights file)."""
    if path.startswith("/api/"):
        return HUB_JSON_CAP
    if config_only and "/resolve/" in path:
        return CONFIG_FILE_CAP
    return None


def _capped_stream(stream: Any, url: str, cap: int, until: float | None) -> Any:
    """``stream`` (an httpx-style SyncByteStream) with its bytes counted: BodyTooLarge past ``cap``,
    NotAnswering once ``until`` (monotonic) passes."""
    base = next((c for c in type(stream).__mro__ if c.__name__ == "SyncByteStream"), None)
    if base is None:  # not the stream type we know: leave it alone
        return stream

    class Capped(base):  # type: ignore[misc, valid-type]
        def __iter__(self) -> Iterator[bytes]:
            yield from capped_chunks(stream, url, cap=cap, until=until, what=HUB_WHAT)

        def close(self) -> None:
            stream.close()

    return Capped()


def _hook(config_only: bool, api_limit: float | None) -> Any:
    def on_response(response: Any) -> None:
        path = str(response.request.url.path)
        cap = cap_for(path, config_only=config_only)
        if cap is not None:
            until = None
            if api_limit is not None and path.startswith("/api/"):  # a trickling answer: not answering
                until = time.monotonic() + api_limit
            response.stream = _capped_stream(response.stream, str(response.request.url), cap, until)

    return on_response


@contextlib.contextmanager
def capped_hub_client(hub: Any, *, config_only: bool, api_limit: float | None = None) -> Iterator[None]:
    """While inside: huggingface_hub's shared client caps its replies (see :func:`cap_for`), and each
    answer of the hub's API must be complete within ``api_limit`` s (a trickle is NotAnswering)."""
    http = getattr(getattr(hub, "utils", None), "_http", None)
    setter = getattr(hub, "set_client_factory", None)
    default = getattr(http, "default_client_factory", None)
    if setter is None or default is None:
        yield
        return

    def factory() -> Any:
        client = default()
        hooks = dict(client.event_hooks)
        client.event_hooks = {
            **hooks,
            "response": [*hooks.get("response", []), _hook(config_only, api_limit)],
        }
        return client

    setter(factory)
    try:
        yield
    finally:
        setter(default)
