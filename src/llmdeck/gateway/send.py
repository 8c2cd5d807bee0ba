"""One request on its way to a backend: its managed model acquired (waited for while it starts), the
all-down check, the upstream request built, forwarded; a refused connection tried again (retry.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llmdeck.gateway import comeback
from llmdeck.gateway.proxy import DROP_REQUEST, RequestCtx, all_down, forward
from llmdeck.gateway.request_body import hung_up
from llmdeck.gateway.retry import MOST_S, Retry
from llmdeck.gateway.routing import RouteState
from llmdeck.gateway.surfaces import asks_stream, rewrite_for
from llmdeck.gateway.upstream import Upstream

if TYPE_CHECKING:
    from llmdeck.gateway.app import GatewayState


async def send(
    st: GatewayState,
    request: Request,
    ctx: RequestCtx,
    route: RouteState,
    body: dict[str, Any] | None,
    raw: bytes,
    path: str | None = None,
) -> Response:
    """``path``: the endpoint to send a JSON body to, when it is not the client's (Ollama's /api/chat
    goes to /v1/chat/completions: ollama_app.py); the client's Content-Type then is not passed on."""
    route.requests += 1
    timeouts = st.loaded.config.timeouts
    gone = lambda: hung_up(request)  # noqa: E731 - one name for the three waits that watch the client
    retry = Retry(st.router, min(timeouts.connect_s, MOST_S), timeouts.restart_wait_s, gone=gone)
    if st.manager is not None:
        from llmdeck.gateway.ondemand import acquire_route, reacquire

        retry.reacquire = reacquire(st.manager, st.router, route, ctx, gone=gone)
        picked = await acquire_route(st.manager, st.router, route, ctx, gone=gone)
        if isinstance(picked, JSONResponse):
            return picked
        route = picked
    assert st.client is not None
    health = st.loaded.config.health
    back = comeback.waiter(
        st.client, st.router, route.backends, health.timeout_s, timeouts.restart_wait_s, gone
    )
    await comeback.hold_drained(route.backends)  # a restart letting its requests finish: wait for it
    if (down := await all_down(st.client, st.router, route, ctx, health, back)) is not None:
        return down
    if body is not None:
        rewrite_for(ctx.api, body, route.route)
    if ctx.api == "responses":
        ctx.ids = st.ids
    drop = DROP_REQUEST if path is None else DROP_REQUEST | {"content-type"}
    headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in drop]
    if path is not None:
        headers.append((b"content-type", b"application/json"))  # curl -d says a form
    streaming = asks_stream(body.get("stream")) if body else request.query_params.get("stream") == "true"
    if path is None:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    first_byte_s = timeouts.first_byte_s if streaming else timeouts.response_s
    up = Upstream(
        request.method, path, headers, raw, first_byte_s, body, timeouts.response_s, streaming, ctx.api
    )
    up.served = {b.url: b.served_model for b in route.route.backends}
    ctx.gauge = st.metrics.in_flight.labels(ctx.route)
    ctx.gauge.inc()
    return await forward(st.client, route, up, ctx, retry)
