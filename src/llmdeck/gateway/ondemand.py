"""The request side of managed models: pick a route's model, wait for it, release it when done."""

from __future__ import annotations

from starlette.responses import JSONResponse

from llmdeck.gateway.manager import ModelManager
from llmdeck.gateway.model_state import ManagedModel
from llmdeck.gateway.proxy import RequestCtx, openai_error
from llmdeck.gateway.routing import Router, RouteState

# the order a route's managed backends are tried in when none is running: a wake beats a start
_PREFERENCE = {"running": 0, "sleeping": 1, "starting": 2, "stopped": 3, "stopping": 4, "failed": 5}


def route_models(manager: ModelManager, route: RouteState) -> list[ManagedModel]:
    models = [manager.get(b.url) for b in route.backends]
    return [m for m in models if m is not None]


def pick(models: list[ManagedModel]) -> ManagedModel:
    """A running model with the fewest requests in flight, else the one quickest to bring up."""
    return min(models, key=lambda m: (_PREFERENCE[m.state], m.inflight, models.index(m)))


async def acquire_route(
    manager: ModelManager, router: Router, route: RouteState, ctx: RequestCtx
) -> RouteState | JSONResponse:
    """The route narrowed to the model that will serve this request, once it is ready; or the error."""
    models = route_models(manager, route)
    if not models:
        return route
    model = pick(models)
    refusal = await manager.acquire(model)
    if refusal is not None:
        route.errors += 1
        manager.events.add("refused", model.name, refusal.message, refusal.code)
        ctx.finish(refusal.status, refusal.code)
        kind = "rate_limit_error" if refusal.status == 429 else "service_unavailable"
        headers = {"Retry-After": str(refusal.retry_after_s)} if refusal.retry_after_s else {}
        return openai_error(refusal.status, refusal.message, kind, refusal.code, **headers)
    ctx.on_finish = lambda: manager.release(model)
    state = router.backends[model.url]
    state.mark_up()  # it answered its readiness check just now (or serves already)
    return RouteState(route.route, [state])
