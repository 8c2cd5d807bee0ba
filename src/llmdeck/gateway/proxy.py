"""Forwarding one request to a route's backends: retries before the first byte, relays chunk by chunk.

* The upstream request is sent with ``stream=True``; its body is relayed as it arrives (``aiter_raw``),
  so SSE events reach the client one by one and nothing is buffered.
* Bounded everywhere: a connect timeout, a first-byte timeout (the headers: short for streams, the
  whole answer for non-streamed requests) and an idle timeout between chunks. A backend that fails
  before anything was sent to the client is marked down and the next replica is tried; when none
  answers the client gets an OpenAI-style JSON error (502, or 504 for timeouts).
* A stream that breaks after the first byte ends with an OpenAI-style ``error`` event; a plain body must
  arrive whole within the response timeout (relay.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.responses import JSONResponse, Response

from llmdeck.gateway.config import Health
from llmdeck.gateway.metrics import GatewayMetrics
from llmdeck.gateway.outcap import client_error, retry
from llmdeck.gateway.refusals import NO_RETRY
from llmdeck.gateway.relay import DROP_RESPONSE, Relay, RelayResponse
from llmdeck.gateway.retry import Retry, Tried
from llmdeck.gateway.roomcap import fit
from llmdeck.gateway.routing import BackendState, Router, RouteState
from llmdeck.gateway.surfaces import (
    ResponseIds,
    lacks_surface,
    missing_surface_message,
    overflow_candidate,
    with_overflow_code,
)
from llmdeck.gateway.upstream import UnsendableBody, Upstream, UpstreamFailure, open_upstream
from llmdeck.util.safetext import safe_line

access_log = logging.getLogger("llmdeck.gateway.access")
GONE = 499  # the status logged for a client that hung up (nginx's)

# Not forwarded upstream: hop-by-hop headers, the client's gateway key, what httpx sets itself.
DROP_REQUEST = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "authorization",
        "x-api-key",
        "api-key",
        "accept-encoding",
        "cookie",
    }
)

INTERNAL = (
    "The gateway failed on this request: a bug (the gateway's log has its traceback); please report it."
)
LOG_PATH_CHARS = 200  # of a path in the access log: a client's 64 KB path had made a 64 KB line


def openai_error(
    status: int, message: str, kind: str, code: str | None = None, **headers: str
) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers or None)


@dataclass
class RequestCtx:
    """One client request's bookkeeping: labels, times, outcome (for metrics and the access log)."""

    metrics: GatewayMetrics
    method: str
    path: str
    route: str = "-"
    key: str = "-"
    started: float = field(default_factory=time.perf_counter)
    backend: str = "-"
    status: int = 0
    outcome: str = ""
    gauge: Any = None  # the in-flight gauge, once the request is on its way
    on_finish: Callable[[], None] | None = None  # e.g. the model manager's release of its lease
    api: str = "other"  # surfaces.api_of(path): the error shapes, the missing-surface message
    ids: ResponseIds | None = None  # /v1/responses: where to remember which backend made the id
    upstream: Upstream | None = None  # what was sent (its output cap lowered, its prompt counted)
    _done: bool = False

    def ttft(self) -> None:
        self.metrics.observe_ttft(self.route, self.key, time.perf_counter() - self.started)

    def finish(self, status: int, outcome: str = "", usage: dict[str, Any] | None = None) -> None:
        if self._done:
            return
        self._done = True
        self.status, self.outcome = status, outcome
        if self.gauge is not None:
            self.gauge.dec()
        if self.on_finish is not None:
            self.on_finish()
        elapsed = time.perf_counter() - self.started
        self.metrics.count_request(self.route, self.key, status, usage or {})
        self.metrics.latency.labels(self.route).observe(elapsed)
        cap, how = self.upstream.cap_note() if self.upstream is not None else ("", None)
        if how is not None:
            self.metrics.lowered.labels(self.route, how).inc()
        if self.upstream is not None and self.upstream.counted is not None:
            self.metrics.counts.labels(self.route, self.upstream.counted[0]).inc()
        access_log.info(
            "%s %s route=%s key=%s backend=%s status=%s%s%s ms=%.1f",
            self.method,
            _log_path(self.path),
            self.route,
            self.key,
            self.backend,
            status,
            f" outcome={outcome}" if outcome else "",
            cap,
            elapsed * 1000,
        )


def _log_path(path: str) -> str:
    """A path as the access log shows it: a client's %1b[2K or %0a is data (it neither drives a terminal
    nor splits lines), and a long one is cut (any client, keyless too, writes a line per request)."""
    if len(path) > LOG_PATH_CHARS:
        path = f"{path[:LOG_PATH_CHARS]}…(+{len(path) - LOG_PATH_CHARS} chars)"
    return safe_line(path)


async def forward(
    client: httpx.AsyncClient, route: RouteState, up: Upstream, ctx: RequestCtx, retry: Retry | None = None
) -> Response:
    """Try the route's backends in order until one answers; relay its reply. Backends that refused the
    connection (nothing was sent) are tried again (``retry``: a short wait, a managed model acquired
    again) before the 502; marked down only then (and probed again soon)."""
    tried = Tried()
    ctx.upstream = up
    candidates = route.candidates()
    while True:
        answer = await _first_answer(client, route, candidates, up, ctx, tried)
        if answer is None and retry is not None and (refused := tried.refused_now()):
            again = await retry.again(route, refused)
            if isinstance(again, RouteState):
                candidates = again.candidates()
                continue
            answer = again  # the model's refusal (acquired again), or None: the 502 below
        break
    tried.settle(ctx, retry)
    if answer is not None:
        return answer
    route.errors += 1
    last = tried.last
    status = last.status if last is not None else 502
    ctx.finish(status, "no_backend")
    return openai_error(
        status,
        f"No backend of model {ctx.route!r} answered: " + "; ".join(tried.failures.values()) + ".",
        "upstream_error",
        "upstream_unavailable",
        **(NO_RETRY if _waited_whole(last, up) else {}),
    )


async def _first_answer(
    client: httpx.AsyncClient,
    route: RouteState,
    candidates: list[BackendState],
    up: Upstream,
    ctx: RequestCtx,
    tried: Tried,
) -> Response | None:
    """The reply of the first of ``candidates`` that answers (or the gateway's answer); None: none did."""
    for i, state in enumerate(candidates):
        state.outstanding += 1
        state.requests += 1
        opened = time.monotonic()
        try:
            resp = await open_upstream(client, state, up)
        except UpstreamFailure as failure:
            state.outstanding -= 1
            tried.failed(state, failure, ctx)
            continue
        except UnsendableBody as bad:
            state.outstanding -= 1
            ctx.finish(400, "bad_request")
            return openai_error(400, bad.message, "invalid_request_error")
        except Exception:  # a bug: answered in the API's shape, the lease and the gauge given back
            state.outstanding -= 1
            logging.getLogger("llmdeck.gateway").exception("a request to %s failed", state.backend.label)
            ctx.finish(500, "internal_error")
            return openai_error(500, INTERNAL, "api_error", "internal_error")
        except BaseException:  # a cancel (the client hung up): this backend is not busy with it
            state.outstanding -= 1
            ctx.finish(499, "client_disconnected")
            raise
        tried.answered(state)
        if resp.status_code == 503 and i + 1 < len(candidates):  # overloaded or starting: try the next
            await resp.aclose()
            state.outstanding -= 1
            tried.failures[state.url] = f"{state.backend.label}: HTTP 503"
            continue
        return await _answered(client, route, resp, state, up, ctx, opened)
    return None


async def _answered(
    client: httpx.AsyncClient,
    route: RouteState,
    resp: httpx.Response,
    state: BackendState,
    up: Upstream,
    ctx: RequestCtx,
    opened: float,
) -> Response:
    if (missing := await _missing_surface(resp, state, ctx)) is not None:
        return missing
    if overflow_candidate(ctx.api, resp.status_code, resp.headers):
        state.mark_up()  # it answered
        return await _bad_request(client, route, resp, state, up, ctx)
    if 300 <= resp.status_code < 400 and resp.headers.get("location"):
        return await _redirected(resp, state, ctx)
    state.mark_up()
    ctx.backend = state.backend.label
    return _marked(RelayResponse(Relay(resp, state, ctx, up.whole_s, opened, streamed=up.stream)), up)


def _waited_whole(last: UpstreamFailure | None, up: Upstream) -> bool:
    """A 504 after the whole answer's timeout (``response_s``, 600 s by default: a request that is no
    stream waits that long for its headers): the SDKs retry a 504 twice, and the client had waited
    3 x 600 s for the same answer. Not a stream's first-byte timeout (30 s) nor a connect timeout."""
    return last is not None and last.reason == "first_byte_timeout" and not up.stream


async def all_down(
    client: httpx.AsyncClient,
    router: Router,
    route: RouteState,
    ctx: RequestCtx,
    health: Health,
    back: Callable[[], Awaitable[bool | None]] | None = None,
) -> JSONResponse | None:
    """Every backend of the route is known down and a probe now finds none up: a 503 at once, unless
    ``back`` (comeback.waiter) waits till one that is being restarted answers (True).

    Not worth a try: a request to a dead peer would hang until its timeout (a whole answer's, 600 s by
    default, for a silent one). Down means a failed probe or request; a backend never checked (a model
    on demand the manager just readied) is tried. ``forward`` still tries every backend in turn."""
    if any(b.healthy for b in route.backends):
        return None
    if await router.recheck(client, route.backends, health.timeout_s):
        return None
    if back is not None and (came := await back()):
        return None
    if back is not None and came is None:  # the client hung up while it waited
        ctx.finish(GONE, "client_disconnected")
        return openai_error(GONE, "The client hung up while its backend restarted.", "invalid_request_error")
    route.errors += 1
    ctx.finish(503, "backend_down")
    why = "; ".join(f"{b.backend.label}: {b.last_error or 'down'}" for b in route.backends)
    return openai_error(
        503,
        f"Every backend of model {route.route.alias!r} is down: {why}. Start it (or fix its URL in the "
        "gateway config), then retry; `llmdeck gateway status` shows the backends.",
        "service_unavailable",
        "backend_down",
        **{"Retry-After": str(max(1, round(health.interval_s)))},
    )


async def _redirected(resp: httpx.Response, state: BackendState, ctx: RequestCtx) -> JSONResponse:
    """A backend's redirect is not relayed: a client following it would reach the backend's own address
    (past the gateway's keys and routes) or another host, and it is no API reply (an empty body). A
    502 in words instead; the backend answered, so it stays up."""
    from llmdeck.util.http import shown_location

    await resp.aclose()
    state.outstanding -= 1
    ctx.finish(502, "upstream_redirect")
    where = shown_location(resp.headers["location"])
    return openai_error(
        502,
        f"The backend {state.backend.label} answered HTTP {resp.status_code}, a redirect to {where!r}; "
        "the gateway follows no redirect. Check the request's path, or point the route at the server's "
        "own URL.",
        "upstream_error",
        "upstream_redirect",
        **NO_RETRY,  # the backend's config, not a passing state: a retry meets the same redirect
    )


async def _small_body(resp: httpx.Response, state: BackendState, limit: int = 65536) -> bytes:
    """An error reply's body, its first ``limit`` bytes; the upstream released either way."""
    body = b""
    try:
        async for chunk in resp.aiter_raw():
            body += chunk
            if len(body) > limit:
                break
    except httpx.HTTPError:
        pass
    finally:
        await resp.aclose()
        state.outstanding -= 1
    return body


def _relayed(resp: httpx.Response, body: bytes, status: int | None = None) -> Response:
    drop = DROP_RESPONSE | {"content-length", "content-encoding"}
    headers = {k: v for k, v in resp.headers.items() if k.lower() not in drop}
    return Response(body, status_code=status or resp.status_code, headers=headers)


async def _bad_request(
    client: httpx.AsyncClient,
    route: RouteState,
    resp: httpx.Response,
    state: BackendState,
    up: Upstream,
    ctx: RequestCtx,
) -> Response:
    """A backend's 400, relayed; a prompt over the context gets OpenAI's code for it on OpenAI's APIs.

    An output cap over a context the gateway did not know yet (not probed: a model on demand just
    started) is sent again, lowered to the max_model_len the 400 names (outcap.retry); a cap that a vLLM
    < 0.32 refused because it counts it against the prompt's room, lowered to the room the prompt leaves
    (roomcap.fit; twice at most in all)."""
    body = await _small_body(resp, state)
    if resp.status_code != 400:  # a 500 on /v1/messages (overflow_candidate)
        if (fixed := client_error(ctx.api, resp.status_code, body)) is None:
            ctx.backend = state.backend.label
            ctx.finish(resp.status_code)
            return _marked(_relayed(resp, body), up)
        body = fixed
    again = up.tries < 2 and (
        await fit(client, state, up, body) or (up.fit is None and retry(state, ctx.api, up.json_body, body))
    )
    if again:
        up.tries += 1
        return await forward(client, RouteState(route.route, [state]), up, ctx)
    ctx.backend = state.backend.label
    ctx.finish(400)
    return _marked(_relayed(resp, with_overflow_code(ctx.api, 400, body) or body, 400), up)


def _marked(resp: Response, up: Upstream) -> Response:
    """The backend's reply, saying that the request's output cap was lowered for it (outcap)."""
    if up.lowered is not None:
        resp.headers.update(up.lowered.headers())
    return resp


async def _missing_surface(resp: httpx.Response, state: BackendState, ctx: RequestCtx) -> Response | None:
    """The backend has no such endpoint (404/405 from its router): say which surface and what to do.

    A 404/405 that is an API error about the request (vLLM's model-not-found) is relayed as it came; a
    405 from its router to a method other than POST is that method's fault, on any API."""
    message = missing_surface_message(ctx.api, state.backend.label)
    wrong_method = resp.status_code == 405 and ctx.method != "POST"
    if (message is None and not wrong_method) or resp.status_code not in (404, 405):
        return None
    body = await _small_body(resp, state)
    if not lacks_surface(resp.status_code, body):
        ctx.finish(resp.status_code, "upstream_error")
        return _relayed(resp, body)
    if wrong_method or message is None:  # the surface is there; not for this method
        ctx.finish(405, "method_not_allowed")
        return openai_error(
            405,
            f"{ctx.method} is not allowed on {ctx.path[:200]!r} by {state.backend.label}: send a POST there.",
            "invalid_request_error",
            "method_not_allowed",
        )
    ctx.finish(501, "surface_missing")
    return openai_error(501, message, "upstream_error", "surface_missing", **NO_RETRY)
