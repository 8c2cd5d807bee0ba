"""The gateway's ASGI app (Starlette): auth, aliases, per-route rewriting, metrics, status.

Endpoints: ``/v1/models`` (the aliases a key may use), ``/v1/chat/completions``, ``/v1/completions``,
Anthropic's ``/v1/messages`` (+ ``/count_tokens``) and OpenAI's ``/v1/responses`` (defaults and override
applied per API: surfaces.py), ``/v1/responses/{id}`` (to the backend that made the id), any other ``/v1/*``
and vLLM's ``/tokenize``, ``/detokenize`` passed through (routed by their ``model``), ``/`` and ``/health``
(no key: clients probe them), ``/metrics`` and ``/gateway/status`` (from loopback, or with a valid key),
the dashboard ``/ui`` and its JSON ``/ui/api/state`` (ui_app.py), Ollama's native ``/api/*``
(ollama_app.py). Every request gets an access-log line.
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
from llmdeck.gateway.metrics import GatewayMetrics
from llmdeck.gateway.ollama_app import ollama_routes
from llmdeck.gateway.proxy import GONE, RequestCtx, openai_error
from llmdeck.gateway.request_body import no_such_endpoint, parse_body, path_problem, read_body
from llmdeck.gateway.routing import Router, RouteState
from llmdeck.gateway.send import send
from llmdeck.gateway.surfaces import (
    ResponseIds,
    api_of,
    reshape_error,
    response_id_of,
)
from llmdeck.gateway.ui_app import ui_routes


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
    ids: ResponseIds = field(default_factory=ResponseIds)  # resp_… -> the route and backend that made it
    ui: Any = None  # the dashboard's caches (ui_state.UiContext), made on its first request
    settings: Any = None


def build_app(loaded: LoadedConfig, *, insecure: bool = False, settings: Any = None) -> Starlette:
    keys = KeyRing(KeyStore(loaded.keys_file))
    state = GatewayState(loaded, Router(loaded), keys, insecure, metrics=GatewayMetrics(keys.labelled))
    state.settings = settings
    state.keys.on_gone += [state.metrics.forget_keys, state.limiter.forget]  # revoked: series, rpm window
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
        Route("/", _root, methods=["GET"]),  # HEAD too: Claude Code probes `HEAD /`
        Route("/health", _health, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
        Route("/gateway/status", _status, methods=["GET"]),
        Route("/v1/models", _models, methods=["GET"]),
        Route("/v1/models/{model:path}", _model, methods=["GET"]),
        Route("/v1/{path:path}", _proxy, methods=["GET", "POST", "DELETE"]),  # no API of /v1 has PUT/PATCH
        Route("/tokenize", _proxy, methods=["POST"]),  # vLLM's, used by `llmdeck check` / `connect`
        Route("/detokenize", _proxy, methods=["POST"]),
        *ui_routes(),  # the dashboard: /ui, /ui/api/state, its actions (ui_app.py)
        *ollama_routes(),  # Ollama's native /api/* (ollama_app.py)
    ]
    handlers = {404: no_such_endpoint, 405: no_such_endpoint}
    app = Starlette(routes=routes, middleware=_cors(loaded), lifespan=lifespan, exception_handlers=handlers)
    app.state.gateway = state
    return app


def _cors(loaded: LoadedConfig) -> list[Middleware]:
    """The CORS middleware when the config asks for it (a browser page on another origin)."""
    if loaded.config.cors is None:
        return []
    from starlette.middleware.cors import CORSMiddleware

    origins = loaded.config.cors.allow_origins
    return [Middleware(CORSMiddleware, allow_origins=origins, allow_methods=["*"], allow_headers=["*"])]


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


def _tokens(request: Request) -> dict[str, str]:
    """The keys a client sent, by header (Claude Code may send both, one of them stale)."""
    auth = request.headers.get("authorization", "")
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    found = {"Authorization": bearer, "x-api-key": request.headers.get("x-api-key", "").strip()}
    return {header: token for header, token in found.items() if token}


def _authenticate(request: Request, st: GatewayState) -> Caller | JSONResponse:
    if not st.keys.enabled:
        return Caller()
    tokens = _tokens(request)
    if not tokens:
        return openai_error(
            401,
            "This gateway needs an API key (Authorization: Bearer sk-llmdeck-… or x-api-key: sk-llmdeck-…).",
            "invalid_request_error",
            "invalid_api_key",
        )
    record = next((r for r in map(st.keys.lookup, tokens.values()) if r is not None), None)
    if record is None:
        sent = " and ".join(tokens)
        return openai_error(
            401, f"The API key is not valid (unknown or revoked; read from {sent}).", "invalid_request_error",
            "invalid_api_key",
        )  # fmt: skip
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


def _logged(request: Request, resp: Response, key: str = "-") -> Response:
    """An access-log line (and the requests counter) for an endpoint that does not proxy."""
    ctx = RequestCtx(_state(request).metrics, request.method, request.url.path)
    ctx.key = key
    ctx.finish(resp.status_code, "unauthorized" if resp.status_code == 401 else "")
    return resp


async def _root(request: Request) -> Response:
    return _logged(request, JSONResponse({"status": "ok", "service": "llmdeck gateway"}))


async def _health(request: Request) -> Response:
    return _logged(request, JSONResponse({"status": "ok"}))


async def _metrics(request: Request) -> Response:
    st = _state(request)
    if not _is_loopback(request) and isinstance(denied := _authenticate(request, st), JSONResponse):
        return _logged(request, denied)
    from prometheus_client import CONTENT_TYPE_LATEST

    st.keys.refresh()  # a key revoked since the last request: its series gone from this scrape too
    return _logged(request, Response(st.metrics.render(), media_type=CONTENT_TYPE_LATEST))


async def _status(request: Request) -> Response:
    st = _state(request)
    if not _is_loopback(request) and isinstance(denied := _authenticate(request, st), JSONResponse):
        return _logged(request, denied)
    return _logged(request, JSONResponse(status_payload(st)))


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
        return _logged(request, caller)
    data = [_model_entry(st, alias) for alias in st.router.routes if caller.may_use(alias)]
    return _logged(request, JSONResponse({"object": "list", "data": data}), caller.name)


async def _model(request: Request) -> Response:
    """``GET /v1/models/{model}``: OpenAI's retrieve (the SDKs' ``models.retrieve``; Ollama answers it
    too), which vLLM does not serve: the alias's entry, or a 404 in the API's shape."""
    st = _state(request)
    caller = _authenticate(request, st)
    if isinstance(caller, JSONResponse):
        return _logged(request, caller)
    asked = str(request.path_params["model"])
    route = st.router.get(asked)
    if route is None or not caller.may_use(route.route.alias):
        allowed = [a for a in st.router.routes if caller.may_use(a)]
        return _logged(request, _no_such_model(asked, allowed), caller.name)
    return _logged(request, JSONResponse(_model_entry(st, route.route.alias)), caller.name)


def _model_entry(st: GatewayState, alias: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": alias,
        "object": "model",
        "created": int(st.started_at),
        "owned_by": "llmdeck",
    }
    if (max_len := st.router.max_model_len(alias)) is not None:
        entry["max_model_len"] = max_len
    return entry


async def _proxy(request: Request) -> Response:
    """Every /v1/* request but /v1/models[/MODEL]; the gateway's own errors in the API's shape."""
    api = api_of(request.url.path)
    bad = path_problem(request)
    resp = _logged(request, bad) if bad is not None else await _proxy_api(request, api)
    return reshape_error(resp, api) if isinstance(resp, JSONResponse) else resp


async def _proxy_api(request: Request, api: str) -> Response:
    st = _state(request)
    path = request.url.path
    ctx = RequestCtx(st.metrics, request.method, path, api=api)
    caller = _authenticate(request, st)
    if isinstance(caller, JSONResponse):
        ctx.finish(caller.status_code, "unauthorized")
        return caller
    ctx.key = caller.name
    t = st.loaded.config.timeouts
    raw = await read_body(request, idle_s=t.idle_s, whole_s=t.response_s)
    parsed = await parse_body(raw, request) if isinstance(raw, bytes) else raw
    if isinstance(parsed, JSONResponse):
        ctx.finish(parsed.status_code, "client_disconnected" if parsed.status_code == GONE else "bad_request")
        return parsed
    assert isinstance(raw, bytes)
    return await dispatch(request, ctx, caller, parsed, raw)


async def dispatch(
    request: Request, ctx: RequestCtx, caller: Caller, body: dict[str, Any] | None, raw: bytes, path: str = ""
) -> Response:
    """A parsed request to its route's backend (``path``: another endpoint than the client's, send.py)."""
    st = _state(request)
    path = path or request.url.path
    route = _pick_by_id(st, path, body, caller) or _pick_route(st, body, caller)
    if ctx.api == "response_id" and isinstance(route, JSONResponse) and route.status_code == 400:
        route = openai_error(
            404,
            f"This gateway did not hand out the response id {response_id_of(path)[:200]!r} (or forgot it: it "
            "remembers the newest 10000); with several models it cannot tell which backend stored it.",
            "invalid_request_error",
            "response_not_found",
        )
    if isinstance(route, JSONResponse):
        ctx.finish(route.status_code, "refused")
        return route
    ctx.route = route.route.alias
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        body["model"] = route.route.alias  # the route's own spelling (a client's may differ in case)
    if (wait := st.limiter.check(caller.name, caller.rpm)) is not None:
        ctx.finish(429, "rate_limited")
        return openai_error(
            429,
            f"Key {caller.name!r} is over its limit of {caller.rpm} requests a minute.",
            "rate_limit_error",
            "rate_limit_exceeded",
            **{"Retry-After": str(wait)},
        )
    return await send(st, request, ctx, route, body, raw, None if path == request.url.path else path)


def _pick_by_id(
    st: GatewayState, path: str, body: dict[str, Any] | None, caller: Caller
) -> RouteState | None:
    """The backend that made a response id: ``/v1/responses/{id}``, or a ``previous_response_id``."""
    if path.startswith("/v1/responses/"):
        rid: Any = response_id_of(path)
    elif path == "/v1/responses" and body is not None:
        rid = body.get("previous_response_id")
    else:
        return None
    known = st.ids.get(rid) if isinstance(rid, str) else None
    if known is None:
        return None
    alias, url = known
    route = st.router.get(alias)
    asked = body.get("model") if body is not None else alias
    if (
        route is None
        or not caller.may_use(alias)
        or not isinstance(asked, str)
        or st.router.get(asked) is not route
    ):
        return None
    state = st.router.backends.get(url)
    return RouteState(route.route, [state]) if state is not None else route


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
        return _no_such_model(alias, allowed)
    alias = route.route.alias  # the route's own spelling (the client's may differ in case)
    if not caller.may_use(alias):
        return openai_error(
            403,
            f"Key {caller.name!r} may not use model {alias!r} (allowed: {', '.join(allowed) or 'none'}).",
            "permission_error",
            "model_not_allowed",
        )
    return route


def _no_such_model(asked: str, allowed: list[str]) -> JSONResponse:
    shown = asked if len(asked) <= 200 else asked[:200] + "…"  # a client's 200 kB name is not echoed back
    said = f"The model {shown!r} does not exist here (models: {', '.join(allowed) or 'none'})."
    return openai_error(404, said, "invalid_request_error", "model_not_found")
