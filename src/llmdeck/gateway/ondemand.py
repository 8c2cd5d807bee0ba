"""The request side of managed models: pick a route's model, wait for it, release it when done."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse

from llmdeck.gateway.follow import started
from llmdeck.gateway.hangup import HUNG_UP, unless_gone
from llmdeck.gateway.manager import ModelManager
from llmdeck.gateway.model_state import ManagedModel
from llmdeck.gateway.proxy import GONE, RequestCtx, openai_error
from llmdeck.gateway.routing import BackendState, Router, RouteState

# the order a route's managed backends are tried in when none is running: a wake beats a start
_PREFERENCE = {"running": 0, "sleeping": 1, "starting": 2, "stopped": 3, "stopping": 4, "failed": 5}


def route_models(manager: ModelManager, route: RouteState) -> list[ManagedModel]:
    models = [manager.get(b.url) for b in route.backends]
    return [m for m in models if m is not None]


def pick(models: list[ManagedModel]) -> ManagedModel:
    """A running model with the fewest requests in flight, else the one quickest to bring up."""
    return min(models, key=lambda m: (_PREFERENCE[m.state], m.inflight, models.index(m)))


async def acquire_route(
    manager: ModelManager,
    router: Router,
    route: RouteState,
    ctx: RequestCtx,
    gone: Callable[[], Awaitable[None]] | None = None,
) -> RouteState | JSONResponse:
    """The route narrowed to the model that will serve this request, once it is ready; or the error.

    ``gone`` returns when the client hangs up: a client that leaves while its model starts leaves the
    queue then (its place had been kept, filling ``max_waiting``, and the request sent once ready)."""
    models = route_models(manager, route)
    if not models:
        return route
    model = pick(models)
    refusal = await unless_gone(manager.acquire(model), gone)  # hung up: its ticket went back
    if refusal is HUNG_UP:
        ctx.finish(GONE, "client_disconnected")
        return openai_error(GONE, "The client hung up while its model was starting.", "invalid_request_error")
    if refusal is not None:
        route.errors += 1
        manager.events.add("refused", model.name, refusal.message, refusal.code)
        ctx.finish(refusal.status, refusal.code)
        kind = "rate_limit_error" if refusal.status == 429 else "service_unavailable"
        return openai_error(refusal.status, refusal.message, kind, refusal.code, **refusal.headers())
    ctx.on_finish = lambda: manager.release(model)
    state = router.backends[model.url]
    if model.record is not None:  # started anew (a stop, a TTL, `llmdeck restart`): another server
        state.server_is("record", started(model.record))
    state.mark_up()  # it answered its readiness check just now (or serves already)
    return RouteState(route.route, [state])


def reacquire(
    manager: ModelManager,
    router: Router,
    route: RouteState,
    ctx: RequestCtx,
    gone: Callable[[], Awaitable[None]] | None = None,
) -> Callable[[list[BackendState]], Awaitable[RouteState | JSONResponse]] | None:
    """How a request acquires its model again when its server refused the connection (retry.py): the
    lease given back, then acquired anew, so `llmdeck restart NAME` under way (its note in the stopped
    server's log: the model starting) is waited for as a start. None for a route without managed models."""
    if not route_models(manager, route):
        return None

    async def again(refused: list[BackendState]) -> RouteState | JSONResponse:
        if ctx.on_finish is not None:
            ctx.on_finish()
            ctx.on_finish = None
        for state in refused:
            if (model := manager.get(state.url)) is not None:
                await manager.refused(model)
        return await acquire_route(manager, router, route, ctx, gone)

    return again
