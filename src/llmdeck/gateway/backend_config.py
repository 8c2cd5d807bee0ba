"""One backend of a gateway route, resolved from its config entry: a URL, a server llmdeck started (its
record followed), or a launch spec the gateway starts on demand; the key it is sent with."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmdeck.errors import ConfigError, LlmdeckError
from llmdeck.gateway.follow import Follow
from llmdeck.gateway.managed import Budget, ManagedBackend, resolve_managed
from llmdeck.util.net import local_url
from llmdeck.util.redact import api_key_problem, redact_text, redact_url

if TYPE_CHECKING:
    from llmdeck.formats.gateway_yaml import MarkedDocument
    from llmdeck.gateway.config import BackendSpec


@dataclass(frozen=True)
class ResolvedBackend:
    url: str  # base URL without /v1
    label: str  # what the config said (a server name or the URL)
    served_model: str | None
    api_key: str | None = field(default=None, repr=False)
    managed: ManagedBackend | None = None  # a launch spec the gateway starts on demand
    follow: Follow | None = None  # a `server:` backend: its record is re-read (gateway/follow.py)
    capabilities: tuple[str, ...] | None = None  # a `url:` backend's, as its config declares them


def _resolve_managed(
    spec: BackendSpec, doc: MarkedDocument, loc: tuple[str | int, ...], source: Path, budget: Budget
) -> ResolvedBackend:
    managed = resolve_managed(spec, doc, loc, source, budget)
    api_key = _api_key(spec, doc, loc)
    if api_key is not None:  # the server it starts requires the key; the gateway sends it
        launch = managed.spec.model_copy(update={"env": {**managed.spec.env, "VLLM_API_KEY": api_key}})
        managed = dataclasses.replace(managed, spec=launch)
    return ResolvedBackend(
        url=local_url(managed.spec.host, managed.spec.port),
        label=managed.name,
        served_model=spec.model or managed.spec.effective_served_name,
        api_key=api_key,
        managed=managed,
    )


def resolve_backend(
    spec: BackendSpec,
    doc: MarkedDocument,
    loc: tuple[str | int, ...],
    settings: Any,
    source: Path,
    budget: Budget,
) -> ResolvedBackend:
    """One entry of a route's ``backends:``; :class:`ConfigError` (exit 2) names its line."""
    from llmdeck.runtime.target import resolve_target

    given = [k for k in ("url", "server", "spec") if getattr(spec, k)]
    if len(given) != 1:
        raise ConfigError(
            f"{doc.where(loc)}: a backend needs exactly one of `url:`, `server:` or `spec:`"
            + (f" (it has {', '.join(given)})." if given else "."),
            hint="Write a URL (http://127.0.0.1:8000), the name of a server from `llmdeck status`, or a "
            "launch spec file from `llmdeck plan MODEL --spec-out FILE`.",
        )
    lifecycle = ("keep", "ttl_s", "group", "memory_gib", "sleep_level", "start_timeout_s", "min_resident_s")
    if spec.capabilities is not None and not spec.url:
        raise ConfigError(
            f"{doc.where((*loc, 'capabilities'))}: `capabilities` is for a `url:` backend; a server's or a "
            "launch spec's are read from its vLLM flags.",
            hint="Remove it.",
        )
    if spec.spec:
        return _resolve_managed(spec, doc, loc, source, budget)
    if extra := [k for k in lifecycle if k in spec.model_fields_set]:
        raise ConfigError(
            f"{doc.where((*loc, extra[0]))}: `{extra[0]}` applies to a `spec:` backend (one the gateway "
            "starts), not to a running server.",
            hint="Remove it, or name a launch spec with `spec:`.",
        )
    target_text = spec.url or spec.server
    assert target_text is not None
    try:
        target = resolve_target(target_text.strip(), settings)
    except LlmdeckError as exc:
        raise ConfigError(f"{doc.where(loc)}: {exc.message}", hint=exc.hint) from exc
    if spec.server and target.record is None:
        raise ConfigError(
            f"{doc.where(loc)}: `server: {spec.server}` looks like a URL.", hint="Use `url:` for URLs."
        )
    pinned_key = _api_key(spec, doc, loc)
    record = target.record
    return ResolvedBackend(
        url=target.base_url,
        label=redact_text(redact_url(target_text.strip())),  # shown in logs, errors, /gateway/status
        served_model=spec.model or target.model,
        api_key=pinned_key or _stored_key(record, settings),
        follow=None
        if record is None
        else Follow(record.name, settings.servers_dir, spec.model, pinned_key, settings.logs_dir),
        capabilities=None if spec.capabilities is None else tuple(dict.fromkeys(spec.capabilities)),
    )


def _stored_key(record: Any, settings: Any) -> str | None:
    """A `server:` backend's own key, as llmdeck stored it when it started the server (`up -- --api-key
    K`): without it every request and health probe had been a 401 unless `api_key_env` named it again."""
    if record is None:
        return None
    from llmdeck.runtime.state import StateStore

    return StateStore(settings.servers_dir).load_secrets(record.name).get("VLLM_API_KEY")


def _api_key(spec: BackendSpec, doc: MarkedDocument, loc: tuple[str | int, ...]) -> str | None:
    if not spec.api_key_env:
        return None
    api_key = os.environ.get(spec.api_key_env)
    if not api_key:
        raise ConfigError(
            f"{doc.where(loc)}: the environment variable {spec.api_key_env} (the backend's API key) is "
            "not set.",
            hint=f"Export {spec.api_key_env} before `llmdeck gateway up`.",
        )
    why = api_key_problem(api_key)
    if why:
        raise ConfigError(
            f"{doc.where(loc)}: the key in {spec.api_key_env} cannot be sent: {why}.",
            hint=f"Export {spec.api_key_env} exactly as the backend has its key.",
        )
    return api_key
