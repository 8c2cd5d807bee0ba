"""A request whose backend refused the connection: sent again, not lost in a restart's gap.

A refused connection means nothing listens at the backend's port now and nothing was sent: `llmdeck
restart NAME` between its stop and its new start (or a `server:` or URL backend restarted by hand), so a
retry is always safe (a reset after the request went out, or a timeout, is not retried). The proxy tries
the route's other backends first, as for any failure; when none answered, the backends that refused are
tried again every ``STEP_S`` till the connect timeout (``timeouts.connect_s``, ``MOST_S`` at most) after
the backend's first refusal, a managed model acquired again first: a restart under way (its note in the
stopped server's log) makes it starting, and the request waits for the new start as for a start of the
gateway's own. A `server:` backend that `llmdeck restart NAME` brings back is tried so, a look a second,
for ``timeouts.restart_wait_s`` (comeback.py). Only then the 502, its words as before.

A backend that refused is marked down when the request is through and did not get its answer there (not
at the first refusal: requests alongside would get the all-down 503 at once), and probed again each
second (:meth:`llmdeck.gateway.routing.Router.soon`) till it answers, not only at the next health round.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.responses import Response

from llmdeck.gateway.comeback import POLL_S, any_back
from llmdeck.gateway.hangup import HUNG_UP, Gone, unless_gone
from llmdeck.gateway.routing import BackendState, Router, RouteState
from llmdeck.gateway.upstream import UpstreamFailure

if TYPE_CHECKING:
    from llmdeck.gateway.proxy import RequestCtx

STEP_S = 0.25  # between tries of a backend that refused the connection
MOST_S = 5.0  # the longest a request tries again (less when the connect timeout is shorter)


@dataclass
class Retry:
    """How a request tries again the backends that refused it: ``reacquire`` acquires its managed model
    again (its lease given back first), and gives the route narrowed to it, or the model's refusal."""

    router: Router
    within_s: float
    restart_wait_s: float = 0.0  # a `server:` backend being restarted is waited for this long (comeback.py)
    reacquire: Callable[[list[BackendState]], Awaitable[RouteState | Response]] | None = None
    gone: Gone | None = None  # returns when the client hangs up

    async def again(self, route: RouteState, refused: list[BackendState]) -> RouteState | Response | None:
        """What to try next after a short wait; None when the time for retries is up: ``within_s`` after
        the backends' first refusal, the same for every request (a dead backend holds no request longer,
        and once one gives up the backend is down: the next get the all-down 503 at once)."""
        now = time.monotonic()
        since = min(s.refused_at or now for s in refused)
        step = STEP_S
        if now + STEP_S > since + self.within_s:
            if now + POLL_S > since + self.restart_wait_s or not await any_back(refused):
                return None
            step = POLL_S  # its server is coming back (`llmdeck restart`): waited for, a look a second
        if await self._left_within(step):  # a request nobody waits for is not sent when the server is back
            return None
        if self.reacquire is not None:
            return await self.reacquire(refused)
        return RouteState(route.route, refused)

    async def _left_within(self, seconds: float) -> bool:
        """Wait ``seconds``; True when the client hung up meanwhile."""
        return await unless_gone(asyncio.sleep(seconds), self.gone) is HUNG_UP


@dataclass
class Tried:
    """What one request met at its backends: the failures in words (the latest per backend), the last
    failure, and the backends that refused the connection and have not answered since."""

    failures: dict[str, str] = field(default_factory=dict)  # url -> "label: detail"
    last: UpstreamFailure | None = None
    refused: dict[str, tuple[BackendState, UpstreamFailure]] = field(default_factory=dict)
    _new: list[BackendState] = field(default_factory=list)  # refused since refused_now was last asked

    def failed(self, state: BackendState, failure: UpstreamFailure, ctx: RequestCtx) -> None:
        self.failures[state.url] = f"{state.backend.label}: {failure.detail}"
        self.last = failure
        if failure.refused:  # marked down when the request is through (settle), not now
            state.refused_at = state.refused_at or time.monotonic()
            self.refused[state.url] = (state, failure)
            self._new.append(state)
        else:
            _down(state, failure, ctx)

    def answered(self, state: BackendState) -> None:
        self.refused.pop(state.url, None)

    def refused_now(self) -> list[BackendState]:
        """The backends that refused since the last ask (to be tried again)."""
        new, self._new = self._new, []
        return new

    def settle(self, ctx: RequestCtx, retry: Retry | None) -> None:
        """The request is through: a backend that refused it and never answered is down (counted once),
        and probed again soon."""
        for state, failure in self.refused.values():
            _down(state, failure, ctx)
            if retry is not None:
                retry.router.soon(state)
        self.refused.clear()


def _down(state: BackendState, failure: UpstreamFailure, ctx: RequestCtx) -> None:
    state.mark_down(failure.detail)
    ctx.metrics.errors.labels(ctx.route, state.backend.label, failure.reason).inc()
    ctx.metrics.backend_up.labels(state.backend.label).set(0)
