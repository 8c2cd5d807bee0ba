"""Replica selection: least outstanding requests among healthy backends, health-checked in the background.

A backend is marked down when a request to it fails before the first byte, dies mid-stream or two health
probes in a row fail (``GET /v1/models``, which also tells its served model name and max_model_len); it is
marked up again by the next probe that answers. When every backend of a route is down, all are tried
anyway (in the same order), so a recovered server is used before the next probe notices.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmdeck.gateway.config import LoadedConfig, ResolvedBackend, ResolvedRoute
from llmdeck.util.http import JSON_CAP, BodyTooLarge, aread_capped
from llmdeck.util.jsonsafe import loads as json_loads

log = logging.getLogger("llmdeck.gateway")


@dataclass
class BackendState:
    """A backend's live state, shared by every route that lists the same URL."""

    backend: ResolvedBackend
    healthy: bool = True
    outstanding: int = 0
    requests: int = 0
    failures: int = 0
    last_error: str | None = None
    served_model: str | None = None
    max_model_len: int | None = None
    checked_at: float | None = None
    probe_failures: int = 0

    @property
    def url(self) -> str:
        return self.backend.url

    def model_name(self) -> str | None:
        return self.backend.served_model or self.served_model

    def mark_down(self, reason: str) -> None:
        if self.healthy:
            log.warning("backend %s marked down: %s", self.backend.label, reason)
        self.healthy = False
        self.failures += 1
        self.last_error = reason

    def snapshot(self) -> dict[str, Any]:
        return {
            "backend": self.backend.label,
            "url": self.url,
            "healthy": self.healthy,
            "outstanding": self.outstanding,
            "requests": self.requests,
            "failures": self.failures,
            "last_error": self.last_error,
            "served_model": self.model_name(),
        }


@dataclass
class RouteState:
    route: ResolvedRoute
    backends: list[BackendState]
    requests: int = 0
    errors: int = 0
    _turn: int = field(default=-1, repr=False)  # the first request goes to the first backend listed

    def candidates(self) -> list[BackendState]:
        """Healthy first, then fewest outstanding; ties rotate so equal replicas share the load."""
        n = len(self.backends)
        self._turn = (self._turn + 1) % n
        order = sorted(
            range(n),
            key=lambda i: (not self.backends[i].healthy, self.backends[i].outstanding, (i - self._turn) % n),
        )
        return [self.backends[i] for i in order]


class Router:
    """Every alias's route state; one BackendState per distinct backend URL."""

    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded = loaded
        # backends to leave unprobed for now (a managed model that is not running: not "down")
        self.skip_probe: Callable[[BackendState], bool] = lambda state: False
        self.backends: dict[str, BackendState] = {}
        self.routes: dict[str, RouteState] = {}
        for route in loaded.routes:
            states = [self.backends.setdefault(b.url, BackendState(b)) for b in route.backends]
            self.routes[route.alias] = RouteState(route, states)

    def get(self, alias: str) -> RouteState | None:
        return self.routes.get(alias)

    def max_model_len(self, alias: str) -> int | None:
        state = self.routes.get(alias)
        if state is None:
            return None
        lens = [b.max_model_len for b in state.backends if b.max_model_len]
        return min(lens) if lens else None

    async def probe(self, client: httpx.AsyncClient, state: BackendState, timeout_s: float) -> None:
        headers = {"Authorization": f"Bearer {state.backend.api_key}"} if state.backend.api_key else {}
        url = f"{state.url}/v1/models"
        try:  # bounded as a whole, and capped: a trickling or endless backend cannot hold the gateway
            async with (
                asyncio.timeout(timeout_s),
                client.stream("GET", url, headers=headers, timeout=timeout_s) as resp,
            ):
                resp.raise_for_status()
                models = json_loads(await aread_capped(resp, url, cap=JSON_CAP)).get("data") or []
        except (httpx.HTTPError, ValueError, AttributeError, TimeoutError, BodyTooLarge) as exc:
            state.probe_failures += 1
            if state.probe_failures >= 2 or not state.healthy:  # one slow probe on a busy box is not "down"
                state.mark_down(f"health probe: {type(exc).__name__}")
            return
        finally:
            state.checked_at = time.time()
        if models and isinstance(models[0], dict):
            state.served_model = state.served_model or models[0].get("id")
            max_len = models[0].get("max_model_len")
            state.max_model_len = int(max_len) if isinstance(max_len, int) else None
        if not state.healthy:
            log.info("backend %s is up again", state.backend.label)
        state.healthy = True
        state.probe_failures = 0

    async def probe_all(self, client: httpx.AsyncClient, timeout_s: float) -> None:
        states = [s for s in self.backends.values() if not self.skip_probe(s)]
        await asyncio.gather(*(self.probe(client, s, timeout_s) for s in states))

    async def health_loop(self, client: httpx.AsyncClient, interval_s: float, timeout_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            with contextlib.suppress(Exception):
                await self.probe_all(client, timeout_s)

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {
                "model": alias,
                "requests": st.requests,
                "errors": st.errors,
                "backends": [b.snapshot() for b in st.backends],
            }
            for alias, st in self.routes.items()
        ]
