"""The gateway's ASGI app (Starlette): auth, aliases, per-route rewriting, metrics, status.

Endpoints: ``/v1/models`` (the aliases a key may use), ``/v1/chat/completions`` and ``/v1/completions``
(defaults and override applied), any other ``/v1/*`` and vLLM's ``/tokenize``, ``/detokenize`` passed through
(routed by their ``model``), ``/health``
(no key), ``/metrics`` and ``/gateway/status`` (from loopback, or with a valid key).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llmdeck.gateway.config import LoadedConfig
from llmdeck.gateway.keys import KeyRing, KeyStore
from llmdeck.gateway.limits import RateLimiter
from llmdeck.gateway.manager import ModelManager
from llmdeck.gateway.merge import rewrite_request
from llmdeck.gateway.metrics import GatewayMetrics
from llmdeck.gateway.proxy import DROP_REQUEST, RequestCtx, Upstream, forward, openai_error
from llmdeck.gateway.routing import Router, RouteState
from llmdeck.util.jsonsafe import loads as json_loads

REWRITTEN_PATHS = ("/v1/chat/completions", "/v1/completions")
MAX_BODY_BYTES = 32 << 20


@dataclass
class Caller:
    """Who sent a request: a key's name and its limits (name "-" and no limits when the gateway is open)."""

    name: str = "-"
    models: list[str] | None = None
    rpm: int | None = None

    def may_use(self, alias: str) -> bool:
        return self.models is None or alias in self.models


@dataclass
class GatewayState:
    loaded: LoadedConfig
    router: Router
    keys: KeyRing
    insecure: bool = False
    limiter: RateLimiter = field(default_factory=RateLimiter)
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)
    client: httpx.AsyncClient | None = None
    started_at: float = field(default_factory=time.time)
    manager: ModelManager | None = None  # routes whose backends are launch specs


def build_app(loaded: LoadedConfig, *, insecure: bool = False, settings: Any = None) -> Starlette:
    state = GatewayState(
        loaded=loaded, router=Router(loaded), keys=KeyRing(KeyStore(loaded.keys_file)), insecure=insecure
    )
    if any(b.managed is not None for r in loaded.routes for b in r.backends):
        _attach_manager(state, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        t = loaded.config.timeouts
        timeout = httpx.Timeout(connect=t.connect_s, read=t.idle_s, write=t.idle_s, pool=t.connect_s)
        from llmdeck.client.transport import LeanTransport

        # llmdeck's lean HTTP/1.1 transport: httpx's default stack (httpcore/h11/anyio) spent most of the
        # gateway's CPU per SSE chunk (benchmarks/README.md, "Gateway overhead")
        transport = LeanTransport()
        async with httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False) as client:
            state.client = client
            h = loaded.config.health
            if state.manager is not None:
                await state.manager.startup()
            await state.router.probe_all(client, h.timeout_s)
            task = asyncio.create_task(state.router.health_loop(client, h.interval_s, h.timeout_s))
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                if state.manager is not None:
                    await state.manager.shutdown()

    routes = [
        Route("/health", _health, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
        Route("/gateway/status", _status, methods=["GET"]),
        Route("/v1/models", _models, methods=["GET"]),
        Route("/v1/{path:path}", _proxy, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        Route("/tokenize", _proxy, methods=["POST"]),  # vLLM's, used by `llmdeck check` / `connect`
        Route("/detokenize", _proxy, methods=["POST"]),
    ]
    middleware = []
    if loaded.config.cors is not None:
        from starlette.middleware.cors import CORSMiddleware

        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=loaded.config.cors.allow_origins,
                allow_methods=["*"],
                allow_headers=["*"],
            )
        )
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.gateway = state
    return app


def _attach_manager(state: GatewayState, settings: Any) -> None:
    """Launch-spec backends: a model manager starts them on demand; health probes skip stopped ones."""
    from llmdeck.settings import Settings

    manager = state.manager = ModelManager(state.loaded, settings if settings is not None else Settings())

    def not_running(backend: Any) -> bool:
        model = manager.get(backend.url)
        return model is not None and model.state != "running"

    state.router.skip_probe = not_running
    from llmdeck.gateway.model_metrics import ModelCollector

    state.metrics.registry.register(ModelCollector(manager))


def _state(request: Request) -> GatewayState:
    return request.app.state.gateway  # type: ignore[no-any-return]


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or None


def _authenticate(request: Request, st: GatewayState) -> Caller | JSONResponse:
    if not st.keys.enabled:
        return Caller()
    token = _bearer(request)
    if token is None:
        return openai_error(
            401,
            "This gateway needs an API key (Authorization: Bearer sk-llmdeck-…).",
            "invalid_request_error",
            "invalid_api_key",
        )
    record = st.keys.lookup(token)
    if record is None:
        return openai_error(
            401, "The API key is not valid (unknown or revoked).", "invalid_request_error", "invalid_api_key"
        )
    limits = st.loaded.config.limits.get(record.name)
    models = limits.models if limits is not None and limits.models is not None else record.models
    rpm = limits.rpm if limits is not None and limits.rpm is not None else record.rpm
    return Caller(name=record.name, models=models, rpm=rpm)


def _is_loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _metrics(request: Request) -> Response:
    st = _state(request)
    if not _is_loopback(request) and isinstance(denied := _authenticate(request, st), JSONResponse):
        return denied
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(st.metrics.render(), media_type=CONTENT_TYPE_LATEST)


async def _status(request: Request) -> Response:
    st = _state(request)
    if not _is_loopback(request) and isinstance(denied := _authenticate(request, st), JSONResponse):
        return denied
    return JSONResponse(status_payload(st))


def status_payload(st: GatewayState) -> dict[str, Any]:
    return {
        "config": str(st.loaded.source),
        "keys_file": str(st.loaded.keys_file),
        "keys_required": st.keys.enabled,
        "keys": len(st.keys.keys),
        "insecure": st.insecure,
        "uptime_s": round(time.time() - st.started_at, 1),
        "routes": st.router.snapshot(),
        **(st.manager.status() if st.manager is not None else {}),
    }


async def _models(request: Request) -> Response:
    st = _state(request)
    caller = _authenticate(request, st)
    if isinstance(caller, JSONResponse):
        return caller
    created = int(st.started_at)
    data = []
    for alias in st.router.routes:
        if caller.may_use(alias):
            entry: dict[str, Any] = {
                "id": alias,
                "object": "model",
                "created": created,
                "owned_by": "llmdeck",
            }
            if (max_len := st.router.max_model_len(alias)) is not None:
                entry["max_model_len"] = max_len
            data.append(entry)
    return JSONResponse({"object": "list", "data": data})


async def _proxy(request: Request) -> Response:
    st = _state(request)
    path = request.url.path
    ctx = RequestCtx(st.metrics, request.method, path)
    caller = _authenticate(request, st)
    if isinstance(caller, JSONResponse):
        ctx.finish(caller.status_code, "unauthorized")
        return caller
    ctx.key = caller.name
    raw = await request.body()
    parsed = _parse_body(raw, request)
    if isinstance(parsed, JSONResponse):
        ctx.finish(parsed.status_code, "bad_request")
        return parsed
    route = _pick_route(st, parsed, caller)
    if isinstance(route, JSONResponse):
        ctx.finish(route.status_code, "refused")
        return route
    ctx.route = route.route.alias
    if (wait := st.limiter.check(caller.name, caller.rpm)) is not None:
        ctx.finish(429, "rate_limited")
        return openai_error(
            429,
            f"Key {caller.name!r} is over its limit of {caller.rpm} requests a minute.",
            "rate_limit_error",
            "rate_limit_exceeded",
            **{"Retry-After": str(wait)},
        )
    return await _send(st, request, ctx, route, parsed, raw)


async def _send(
    st: GatewayState,
    request: Request,
    ctx: RequestCtx,
    route: RouteState,
    body: dict[str, Any] | None,
    raw: bytes,
) -> Response:
    route.requests += 1
    if st.manager is not None:
        from llmdeck.gateway.ondemand import acquire_route

        picked = await acquire_route(st.manager, st.router, route, ctx)
        if isinstance(picked, JSONResponse):
            return picked
        route = picked
    if body is not None and request.url.path in REWRITTEN_PATHS:
        rewrite_request(body, defaults=route.route.defaults, override=route.route.override, served_model=None)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in DROP_REQUEST}
    timeouts = st.loaded.config.timeouts
    streaming = bool(body and body.get("stream"))
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    up = Upstream(
        request.method, path, headers, raw, timeouts.first_byte_s if streaming else timeouts.response_s, body
    )
    ctx.gauge = st.metrics.in_flight.labels(ctx.route)
    ctx.gauge.inc()
    assert st.client is not None
    return await forward(st.client, route, up, ctx)


def _parse_body(raw: bytes, request: Request) -> dict[str, Any] | JSONResponse | None:
    if not raw:
        return None
    if len(raw) > MAX_BODY_BYTES:
        return openai_error(413, "The request body is over 32 MiB.", "invalid_request_error")
    if "json" not in request.headers.get("content-type", "application/json"):
        return None
    try:
        body = json_loads(raw)
    except ValueError:
        return openai_error(400, "The request body is not valid JSON.", "invalid_request_error")
    if not isinstance(body, dict):
        return openai_error(400, "The request body must be a JSON object.", "invalid_request_error")
    return body


def _pick_route(st: GatewayState, body: dict[str, Any] | None, caller: Caller) -> RouteState | JSONResponse:
    allowed = [a for a in st.router.routes if caller.may_use(a)]
    alias = body.get("model") if body else None
    if not isinstance(alias, str):
        if len(allowed) == 1 and body is None:
            return st.router.routes[allowed[0]]
        return openai_error(
            400,
            f"Say which model in the body's `model` (one of: {', '.join(allowed)}).",
            "invalid_request_error",
            "model_missing",
        )
    route = st.router.get(alias)
    if route is None:
        return openai_error(
            404,
            f"The model {alias!r} does not exist here (models: {', '.join(allowed)}).",
            "invalid_request_error",
            "model_not_found",
        )
    if not caller.may_use(alias):
        return openai_error(
            403,
            f"Key {caller.name!r} may not use model {alias!r} (allowed: {', '.join(allowed) or 'none'}).",
            "permission_error",
            "model_not_allowed",
        )
    return route
