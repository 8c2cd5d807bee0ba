"""A ``server:`` backend follows its llmdeck server's record: its URL, served model name and key.

The gateway resolves a backend once, at its start. A backend named by its llmdeck server (``backends:
[coder]``) can change under it: ``llmdeck restart coder -- --api-key NEW`` (or ``--port``,
``--served-model-name``) rewrites the record, and a gateway that kept what it read at its start sent the
old key for ever (every request and probe a 401 until the gateway restarted). The router re-reads the
record before each health probe (a few small files every ``health.interval_s``; a request never waits on
it): what the config itself pinned (``model:``, ``api_key_env``) stays as configured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeck.errors import LlmdeckError

if TYPE_CHECKING:
    from llmdeck.gateway.backend_config import ResolvedBackend
    from llmdeck.runtime.state import ServerRecord


@dataclass(frozen=True)
class Follow:
    server: str  # the llmdeck server's name
    servers_dir: Path  # where its record lives
    model: str | None = None  # `model:` as the config pinned it (None: the record's served name)
    api_key: str | None = None  # the key `api_key_env` gave (None: the key the server was started with)
    logs_dir: Path | None = None  # where its log is: a restart's note in it (comeback.py)


def started(record: ServerRecord) -> str:
    """What tells one start of a server from the next (BackendState.server_is): its pid and start time."""
    return f"pid {record.pid} started {record.started_at.isoformat()}"


def current(backend: ResolvedBackend) -> tuple[ResolvedBackend, str | None]:
    """The backend as its server's record says now, and which start of it the record is (``started``);
    unchanged and None when it follows none or the record is gone (a server that is down or was
    removed: the probe says so)."""
    follow = backend.follow
    if follow is None:
        return backend, None
    from llmdeck.runtime.state import StateStore

    store = StateStore(follow.servers_dir)
    try:
        record = store.load(follow.server)
    except (LlmdeckError, OSError, ValueError):
        return backend, None
    key = follow.api_key or store.load_secrets(record.name).get("VLLM_API_KEY")
    fresh = replace(
        backend, url=record.base_url, served_model=follow.model or record.served_model_name, api_key=key
    )
    return (backend if fresh == backend else fresh), started(record)
