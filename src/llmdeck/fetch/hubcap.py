"""Caps on what huggingface_hub reads while `llmdeck fetch` downloads: an endpoint that answers the
hub's API (a repo's file list) or, with ``--config-only``, a config or tokenizer file with an endless
body is stopped with a :class:`llmdeck.util.http.BodyTooLarge` (exit 1), where huggingface_hub would
read it into memory or onto the disk without end; an API answer must be whole within ``--timeout``, a
config file within 10x that (a trickle of a byte a second ends). Weights are never capped. Ctrl-C or
SIGTERM stop every download worker at its next request or chunk (``Cancelled``).

It hooks the responses of huggingface_hub's shared HTTP client (``set_client_factory``, hub >= 1.0);
with an older hub (requests) nothing is hooked and only the first question (``check_answers``) is
capped."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from llmdeck.errors import DownloadError, InternalError
from llmdeck.util.http import IDENTITY, capped_chunks, plain_body

HUB_JSON_CAP = 16 << 20  # the hub's answer about a repo (a file list): a few KB, a few MB for huge repos
CONFIG_FILE_CAP = 256 << 20  # config.json, tokenizer.json (tens of MB at most), a safetensors index
HUB_WHAT = "a Hugging Face hub or mirror"
CONFIG_FILE_TIMES = 10  # a config or tokenizer file must be whole within 10x --timeout (a trickle ends)


class Cancelled(InternalError):
    """Ctrl-C or SIGTERM during a download: every worker's next request or chunk stops here."""


def cap_for(path: str, *, config_only: bool) -> int | None:
    """The most bytes a reply for ``path`` may have (None: no cap, e.g. a weights file). With
    ``config_only`` every file is a config or tokenizer file, wherever its ``/resolve/`` URL redirects
    (a mirror's redirect to another path had taken it out of the cap)."""
    if path.startswith("/api/"):
        return HUB_JSON_CAP
    return CONFIG_FILE_CAP if config_only else None


def _stop_if(cancel: threading.Event) -> None:
    if cancel.is_set():
        raise Cancelled("the download was interrupted")


def _capped_stream(
    stream: Any, url: str, cap: int | None, until: float | None, cancel: threading.Event
) -> Any:
    """``stream`` (an httpx-style SyncByteStream) with its bytes counted: BodyTooLarge past ``cap``,
    NotAnswering once ``until`` (monotonic) passes, Cancelled at the next chunk once ``cancel`` is set."""
    base = next((c for c in type(stream).__mro__ if c.__name__ == "SyncByteStream"), None)
    if base is None:  # not the stream type we know: leave it alone
        return stream

    class Capped(base):  # type: ignore[misc, valid-type]
        def __iter__(self) -> Iterator[bytes]:
            capped = capped_chunks(stream, url, cap=cap, until=until, what=HUB_WHAT) if cap else None
            for chunk in capped or stream:
                _stop_if(cancel)
                yield chunk

        def close(self) -> None:
            stream.close()

    return Capped()


RETRY_AFTER_CAP_S = 30.0  # the longest wait a rate limit may ask (hf sleeps it, deaf to Ctrl-C)


def _refuse_long_waits(response: Any) -> None:
    """DownloadError for a 429/503 whose Retry-After asks more than ``RETRY_AFTER_CAP_S``: huggingface_hub
    sleeps it out in a worker (100000 s had been waited, SIGTERM unheard)."""
    if response.status_code not in (429, 503):
        return
    asked = str(response.headers.get("retry-after", "")).strip()
    seconds = float(asked) if asked.replace(".", "", 1).isdigit() else None
    if seconds is not None and seconds > RETRY_AFTER_CAP_S:
        raise DownloadError(
            f"{response.request.url.host} answered HTTP {response.status_code} and asks to wait "
            f"{seconds:g} s before the next request (rate limited or busy).",
            hint="Run the same command later (finished files are kept), set HF_TOKEN (a logged-in user "
            "has a higher limit), or use a mirror (--endpoint).",
        )


def _hook(config_only: bool, api_limit: float | None, cancel: threading.Event) -> Any:
    def on_response(response: Any) -> None:
        _stop_if(cancel)
        _refuse_long_waits(response)
        path = str(response.request.url.path)
        cap = cap_for(path, config_only=config_only)
        if cap is not None:  # asked plain (_ask_plain): the cap counts what is written, never inflated
            plain_body(response, str(response.request.url), what=HUB_WHAT)
        until = None
        if cap is not None and api_limit is not None:  # a trickling answer: not answering
            until = time.monotonic() + api_limit * (1 if path.startswith("/api/") else CONFIG_FILE_TIMES)
        response.stream = _capped_stream(response.stream, str(response.request.url), cap, until, cancel)

    return on_response


def _ask_plain(config_only: bool) -> Any:
    """A request hook: a capped reply is asked for as sent (``Accept-Encoding: identity``): a gzip one
    was inflated as it was written, past the cap (300 bytes of gzip inside gzip made a 64 MiB file)."""

    def on_request(request: Any) -> None:
        if cap_for(str(request.url.path), config_only=config_only) is not None:
            request.headers.update(IDENTITY)

    return on_request


@contextlib.contextmanager
def _cancel_on_signal(cancel: threading.Event) -> Iterator[None]:
    """Ctrl-C / SIGTERM set ``cancel`` before they unwind the main thread: huggingface_hub's download
    pool waits for its workers (every file queued, not only those in flight) before the interrupt
    gets out, so the workers must stop themselves (their next request or chunk raises Cancelled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: Any) -> None:
        cancel.set()
        before = previous[signal.Signals(signum)]
        if callable(before):
            before(signum, frame)
        raise KeyboardInterrupt

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


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

    cancel = threading.Event()

    def factory() -> Any:
        client = default()
        hooks = dict(client.event_hooks)
        client.event_hooks = {
            **hooks,
            "request": [
                *hooks.get("request", []),
                lambda _request: _stop_if(cancel),
                _ask_plain(config_only),
            ],
            "response": [*hooks.get("response", []), _hook(config_only, api_limit, cancel)],
        }
        return client

    setter(factory)
    try:
        with _cancel_on_signal(cancel):
            yield
    finally:
        setter(default)
