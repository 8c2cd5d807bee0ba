"""The gateway's config file (YAML): routes, keys file, per-key limits, timeouts, CORS.

Validated by pydantic; every error names the file and line (``formats.gateway_yaml``). Backends are URLs, the
names of servers llmdeck started (resolved through the runtime records, as ``check``/``bench`` do), or
launch specs the gateway starts on demand within a memory budget (``managed``, ``manager``).

Example::

    routes:
      - model: qwen-fast                # the alias clients send as "model"
        backends: [coder, http://127.0.0.1:8001]
        defaults:                       # filled in where the request left them out
          chat_template_kwargs: {enable_thinking: false}
          max_tokens: 2048
        override: {temperature: 0.2}    # always replaces the client's value (null removes a field)
        responses:                      # optional: /v1/responses' own (else the route's, renamed)
          defaults: {max_output_tokens: 4096}
    keys_file: keys.json                # relative to this file; default: <state>/gateway/keys.json
    limits:
      alice: {rpm: 30, models: [qwen-fast]}
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from llmdeck.errors import ConfigError
from llmdeck.formats.gateway_yaml import MarkedDocument, format_loc, parse_gateway_yaml, read_gateway_text
from llmdeck.gateway.backend_config import ResolvedBackend, resolve_backend
from llmdeck.gateway.keys import MAX_RPM, alias_problem
from llmdeck.gateway.managed import Budget, check_managed, resolve_kind
from llmdeck.util.shellquote import quote

GATEWAY_CONFIG_SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _json_numbers(fields: dict[str, Any]) -> dict[str, Any]:
    """Request fields as JSON carries them: YAML's ``.nan`` / ``.inf`` had gone out in every request
    (``"max_tokens": NaN``, which no JSON reader takes)."""

    def walk(value: Any, where: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where} is {value}, which JSON cannot carry: give a finite number")
        inner = dict(enumerate(value)) if isinstance(value, list) else value
        for key, item in inner.items() if isinstance(inner, dict) else ():
            walk(item, f"{where}.{key}")

    for name, value in fields.items():
        walk(value, name)
    return fields


RequestFields = Annotated[dict[str, Any], AfterValidator(_json_numbers)]


class BackendSpec(_Strict):
    """A backend in its long form: a URL, a running llmdeck server, or a launch spec started on demand."""

    url: str | None = Field(None, description="An OpenAI-compatible server URL (with or without /v1).")
    server: str | None = Field(None, description="The name of a server llmdeck started.")
    spec: str | None = Field(None, description="A launch spec file: the gateway starts it on demand.")
    keep: bool = Field(False, description="spec: never evicted to make room for another model.")
    ttl_s: float | None = Field(
        None, ge=0, le=604800, description="spec: stop after this long idle (0: never)."
    )
    group: str | None = Field(None, min_length=1, description="spec: members are not evicted for each other.")
    memory_gib: float | None = Field(None, gt=0, le=65536, description="spec: the footprint, declared.")
    sleep_level: Literal[1, 2] | None = Field(None, description="spec: vLLM sleep mode instead of a stop.")
    start_timeout_s: float | None = Field(None, gt=0, le=7200, description="spec: readiness timeout.")
    min_resident_s: float | None = Field(
        None, ge=0, le=3600, description="spec: not evicted for another this long after ready while used."
    )
    model: str | None = Field(None, description="The backend's served model name (default: learned).")
    capabilities: list[Literal["completion", "embedding", "vision", "tools", "thinking"]] | None = Field(
        None, min_length=1, description="url: what Ollama's /api/show says it can (else completion, tools)."
    )
    api_key_env: str | None = Field(None, description="Environment variable with the backend's API key.")


class ApiRewrite(_Strict):
    """One API's own defaults/override (replacing the route's, renamed, for that API)."""

    defaults: RequestFields = Field(default_factory=dict)
    override: RequestFields = Field(default_factory=dict)
    fold_system: bool = Field(
        False,
        description="messages: move `role: system` entries of `messages` into the top-level `system` "
        "(Claude Code 2.1 sends one; vLLM 0.22's Messages API refuses it, 0.32 takes it).",
    )


class Route(_Strict):
    """One alias and the backends (replicas) that serve it."""

    model: str = Field(..., min_length=1, description="The alias clients send as `model`.")
    backends: list[str | BackendSpec] = Field(..., min_length=1)
    defaults: RequestFields = Field(default_factory=dict, description="Request fields filled in if absent.")
    override: RequestFields = Field(default_factory=dict, description="Request fields always replaced.")
    messages: ApiRewrite | None = Field(None, description="/v1/messages: its own defaults/override.")
    responses: ApiRewrite | None = Field(None, description="/v1/responses: its own defaults/override.")

    @field_validator("model")
    @classmethod
    def _printable(cls, alias: str) -> str:
        """keys.alias_problem's rule: printable, no spaces around it, 200 characters at most."""
        if (why := alias_problem(alias)) is not None:
            raise ValueError(why)
        return alias


class KeyLimits(_Strict):
    rpm: int | None = Field(None, ge=1, le=MAX_RPM, description="Requests per minute for this key.")
    models: list[str] | None = Field(None, description="Aliases this key may use (default: all).")


class Timeouts(_Strict):
    connect_s: float = Field(5.0, gt=0, le=600)
    first_byte_s: float = Field(30.0, gt=0, le=3600, description="Streamed request: until the headers.")
    response_s: float = Field(600.0, gt=0, le=7200, description="Non-streamed request: the whole answer.")
    idle_s: float = Field(
        300.0,
        gt=0,
        le=3600,
        description="A stream's longest silence between chunks; also the longest a client may leave a reply "
        "unread (then its connection is closed and its backend request ended).",
    )
    restart_wait_s: float = Field(
        900.0,
        ge=0,
        le=7200,
        description="How long a request waits for a `server:` backend that `llmdeck restart` brings back "
        "(0: a 503 at once).",
    )


class Health(_Strict):
    interval_s: float = Field(10.0, gt=0, le=3600)
    timeout_s: float = Field(5.0, gt=0, le=60)


class Cors(_Strict):
    allow_origins: list[str] = Field(..., min_length=1)


class GatewayConfig(_Strict):
    schema_version: int = GATEWAY_CONFIG_SCHEMA_VERSION
    routes: list[Route] = Field(..., min_length=1)
    keys_file: Path | None = None
    limits: dict[str, KeyLimits] = Field(default_factory=dict)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    health: Health = Field(default_factory=Health)
    cors: Cors | None = None
    budget: Budget = Field(default_factory=Budget)


@dataclass
class ResolvedRoute:
    alias: str
    backends: list[ResolvedBackend]
    defaults: dict[str, Any]
    override: dict[str, Any]
    per_api: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # "messages": {defaults,..}


@dataclass
class LoadedConfig:
    config: GatewayConfig
    routes: list[ResolvedRoute]
    keys_file: Path  # where keys live (the default one may not exist: then the gateway is open)
    source: Path

    def route(self, alias: str) -> ResolvedRoute | None:
        return next((r for r in self.routes if r.alias == alias), None)


def load_config(path: Path, settings: Any) -> LoadedConfig:
    """Read, validate and resolve a gateway config; :class:`ConfigError` (exit 2) names the line."""
    path = Path(path).expanduser()
    return parse_config(read_gateway_text(path), source=path, settings=settings)


def parse_config(text: str, *, source: Path, settings: Any) -> LoadedConfig:
    doc = parse_gateway_yaml(text, str(source))
    try:
        config = GatewayConfig.model_validate(doc.data)
    except ValidationError as exc:
        raise _validation_error(exc, doc) from exc
    _check_consistency(config, doc)
    if any(isinstance(b, BackendSpec) and b.spec for r in config.routes for b in r.backends):
        config.budget = resolve_kind(config.budget)
    routes = [
        _resolve_route(i, route, doc, settings, source, config) for i, route in enumerate(config.routes)
    ]
    _share_server_keys(routes, doc)
    check_managed(
        [
            (b.managed, doc.where(("routes", i, "backends", j)))
            for i, r in enumerate(routes)
            for j, b in enumerate(r.backends)
            if b.managed is not None
        ]
    )
    keys_file = _keys_path(config.keys_file, source, settings)
    if config.keys_file is not None:
        _check_keys_file(keys_file, doc)
    return LoadedConfig(config=config, routes=routes, keys_file=keys_file, source=source)


def _long_form(entry: str | BackendSpec) -> BackendSpec:
    """A backend given as a bare string is a URL."""
    return BackendSpec(url=entry) if isinstance(entry, str) else entry


def _share_server_keys(routes: list[ResolvedRoute], doc: MarkedDocument) -> None:
    """Routes that list one server (one URL) share its state, and so its key: a key one entry names goes
    with every entry of that URL (else the first entry's, keyless, was sent for all: 401s, the server
    marked down); two different keys for one server are refused."""
    keys: dict[str, tuple[str, tuple[str | int, ...]]] = {}
    for i, route in enumerate(routes):
        for j, b in enumerate(route.backends):
            loc = ("routes", i, "backends", j)
            first = keys.setdefault(b.url, (b.api_key, loc)) if b.api_key is not None else None
            if first is not None and first[0] != b.api_key:
                raise ConfigError(
                    f"{doc.where(loc)}: the server {b.label} is also the backend at {doc.where(first[1])}, "
                    "with another key (`api_key_env`); one server takes one key.",
                    hint="Name the same api_key_env in both entries, or in one of them.",
                )
    for route in routes:
        route.backends = [
            dataclasses.replace(b, api_key=keys[b.url][0]) if b.api_key is None and b.url in keys else b
            for b in route.backends
        ]


def default_keys_file(settings: Any) -> Path:
    return Path(settings.state_dir) / "gateway" / "keys.json"


def _keys_path(value: Path | None, source: Path, settings: Any) -> Path:
    if value is None:
        return default_keys_file(settings)
    value = value.expanduser()
    return value if value.is_absolute() else (source.parent / value)


def _check_keys_file(path: Path, doc: MarkedDocument) -> None:
    """A keys file the config names must exist: the gateway runs open (no keys) only when none is named.

    (Without this check a typo in the path, or a folder not made yet, would serve with no API keys at
    all, as ``KeyRing`` turns keys on only for a file that exists at start.)"""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        folder = "" if path.parent.is_dir() else f" (nor does its folder {path.parent})"
        raise ConfigError(
            f"{doc.where(('keys_file',))}: the keys file {path} does not exist{folder}; the gateway would "
            "run with no API keys.",
            hint=f"Create it with `llmdeck keys create NAME --keys-file {quote(str(path))}`, or fix the "
            "path; remove `keys_file:` only to run without keys.",
        ) from None
    except OSError:
        pass  # unreadable, a loop...: the keys file's own checks (KeyStore.load) say what is wrong


def _validation_error(exc: ValidationError, doc: MarkedDocument) -> ConfigError:
    from llmdeck.formats.validation import explain

    places = explain(exc, GatewayConfig)
    lines = [f"{doc.where(loc)}: {format_loc(loc)}: {message}" for loc, message in places]
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return ConfigError(
        "The gateway config is invalid: " + "; ".join(lines) + more + ".",
        hint="Fix those lines; the keys are routes (model, backends, defaults, override, messages, "
        "responses), keys_file, limits, timeouts, health, cors and budget.",
    )


def _check_consistency(config: GatewayConfig, doc: MarkedDocument) -> None:
    seen: dict[str, int] = {}
    for i, route in enumerate(config.routes):
        if route.model in seen:
            raise ConfigError(
                f"{doc.where(('routes', i, 'model'))}: the alias {route.model!r} is already "
                f"routes[{seen[route.model]}].",
                hint="Give every route its own `model:` alias (one route may list several backends).",
            )
        seen[route.model] = i
    for name, limits in config.limits.items():
        for j, alias in enumerate(limits.models or []):
            if alias not in seen:
                raise ConfigError(
                    f"{doc.where(('limits', name, 'models', j))}: key {name!r} lists {alias!r}, which no "
                    f"route serves (aliases: {', '.join(seen)}).",
                    hint="Use an alias from `routes:`.",
                )


def _resolve_route(
    i: int, route: Route, doc: MarkedDocument, settings: Any, source: Path, config: GatewayConfig
) -> ResolvedRoute:
    backends = [
        resolve_backend(_long_form(b), doc, ("routes", i, "backends", j), settings, source, config.budget)
        for j, b in enumerate(route.backends)
    ]
    kinds = {b.managed is not None for b in backends}
    if len(kinds) > 1:
        raise ConfigError(
            f"{doc.where(('routes', i, 'backends'))}: route {route.model!r} mixes `spec:` backends (started "
            "on demand) with running servers.",
            hint="Give the launch specs a route of their own, or list only running servers here.",
        )
    per_api = {api: block.model_dump() for api in ("messages", "responses") if (block := getattr(route, api))}
    return ResolvedRoute(
        alias=route.model,
        backends=backends,
        defaults=route.defaults,
        override=route.override,
        per_api=per_api,
    )
