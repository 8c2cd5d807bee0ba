"""Replica selection: least outstanding requests among healthy backends, health-checked in the background.

A backend is marked down when a request to it fails before the first byte, dies mid-stream or two health
probes in a row fail (``GET /v1/models``, which also tells its served model name and max_model_len); it is
marked up again by the next probe that answers (one that refused a request's connection, a server
restarting, is probed each second till it does: ``soon``). The gateway probes every backend before it
serves: one that fails that first probe is down from the start (it was never seen up; a "healthy" it never
earned would be a guess). Until its first probe or reply a backend shows as unchecked (``healthy: null``),
e.g. a model on demand that is not running; it is still tried. When every backend of a route is down, a
request re-probes them at once (``recheck``): one that answers is used (so a recovered server serves
before the next periodic probe), else the request gets a 503 at once instead of waiting on a dead peer.
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

from llmdeck.gateway.backend_config import ResolvedBackend
from llmdeck.gateway.comeback import HELD, drained
from llmdeck.gateway.config import LoadedConfig, ResolvedRoute
from llmdeck.gateway.follow import current
from llmdeck.util.http import IDENTITY, JSON_CAP, BodyTooLarge, aread_capped, failure_words
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.redact import redact_url

log = logging.getLogger("llmdeck.gateway")
QUICK_S = 1.0  # how often a backend that refused a connection is probed till it answers (soon)
MAX_MODEL_LEN = 1 << 40  # a backend's max_model_len past this (or not a positive integer) is not shown


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
    checked_at: float | None = None  # the last probe's (or reply's) time; None: never checked
    down_at: float | None = None  # when it was last marked down (a check before that is no news)
    refused_at: float | None = None  # monotonic: its first refused connection since it last answered
    probe_failures: int = 0
    noted: set[tuple[str, int]] = field(default_factory=set)  # outcap.note's: (api, cap) said in the log
    reserves_cap: bool = False  # it counts an output cap against the prompt's room (outcap.retry)
    no_count: set[str] = field(default_factory=set)  # its count endpoints that answered 404 (roomcap)
    bytes_per_token: float = 0.0  # the most request-body bytes per prompt token it counted (roomcap)
    seen: dict[str, object] = field(default_factory=dict)  # what told its server apart (server_is)

    @property
    def url(self) -> str:
        return self.backend.url

    def model_name(self) -> str | None:
        return self.name_for(self.backend.served_model)

    def name_for(self, configured: str | None) -> str | None:
        """The model name a route's entry for this server sends: its `model:`, else the one the server
        lists first (two routes on one server, a base model and its LoRA adapter, each send their own)."""
        return configured or self.served_model

    def mark_down(self, reason: str) -> None:
        if self.healthy:
            log.warning("backend %s marked down: %s", self.backend.label, reason)
        self.healthy = False
        self.down_at = time.time()
        self.failures += 1
        self.last_error = reason

    def checked_since_down(self, *, within_s: float, now: float) -> bool:
        """Probed (or answered) within ``within_s`` and not marked down since: a reply that broke after
        its start (which counted as a check) is news, and the backend is probed again."""
        if self.checked_at is None or now - self.checked_at >= within_s:
            return False
        return self.down_at is None or self.checked_at >= self.down_at

    def mark_up(self) -> None:
        """It answered (a probe, a reply, a readiness check)."""
        if not self.healthy:
            log.info("backend %s is up again", self.backend.label)
        self.healthy = True
        self.probe_failures = 0
        self.checked_at = time.time()
        self.refused_at = None

    def server_is(self, what: str, ident: object) -> None:
        """What tells the server behind this backend apart now (``what``: "record", its pid and start,
        for a managed model or a `server:` backend; "models", its /v1/models entry). One that changed
        is another server (restarted, upgraded): what was learnt of the old one is learnt again. A
        vLLM 0.31 restarted as 0.32 had kept ``reserves_cap`` till the gateway restarted, its
        /v1/responses caps over the context passed on as sent and refused, no longer lowered."""
        before = self.seen.get(what)
        self.seen[what] = ident
        if before is None or before == ident:
            return
        self.seen = {what: ident}  # the rest is told by the new server
        if self.reserves_cap:
            log.info(
                "backend %s: its server changed (%s); whether it counts the output cap against the "
                "prompt's room is learnt again",
                self.backend.label,
                "started again" if what == "record" else "its /v1/models entry changed",
            )
        self.reserves_cap, self.max_model_len, self.bytes_per_token = False, None, 0.0
        self.noted.clear()
        self.no_count.clear()

    def follow_server(self) -> None:
        """A `server:` backend takes what its record says now: `restart -- --api-key NEW` (or `--port`,
        `--served-model-name`) had left the gateway sending the old key, 401 after 401."""
        fresh, start = current(self.backend)
        if start is not None:
            self.server_is("record", start)
        if fresh is not self.backend:
            changed = [
                f for f in ("url", "served_model", "api_key") if getattr(fresh, f) != getattr(self.backend, f)
            ]
            log.info(
                "backend %s: its server was changed (%s); using it as it is now",
                fresh.label,
                ", ".join(changed),
            )
            self.backend = fresh

    def snapshot(self) -> dict[str, Any]:
        return {
            "backend": self.backend.label,
            "url": redact_url(self.url),
            "healthy": self.healthy if self.checked_at is not None else None,  # None: not checked yet
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
        self._rechecks: dict[str, asyncio.Future[None]] = {}  # url -> the re-probe requests share
        self._soon: dict[str, float] = {}  # url -> when it refused a connection (soon; monotonic)
        for route in loaded.routes:
            states = [self.backends.setdefault(b.url, BackendState(b)) for b in route.backends]
            self.routes[route.alias] = RouteState(route, states)
        folds: dict[str, list[str]] = {}
        for alias in self.routes:
            folds.setdefault(alias.casefold(), []).append(alias)
        self._folded = {fold: names[0] for fold, names in folds.items() if len(names) == 1}

    def get(self, alias: str) -> RouteState | None:
        """The route of ``alias``; else of the one alias it names in another case (Ollama matches model
        names so: `Qwen3:30B` is `qwen3:30b` there, and a client's config may say either)."""
        exact = self.routes.get(alias)
        if exact is not None:
            return exact
        other = self._folded.get(alias.casefold())
        return self.routes[other] if other is not None else None

    def max_model_len(self, alias: str) -> int | None:
        state = self.routes.get(alias)
        if state is None:
            return None
        lens = [b.max_model_len for b in state.backends if b.max_model_len]
        return min(lens) if lens else None

    async def probe(self, client: httpx.AsyncClient, state: BackendState, timeout_s: float) -> None:
        state.follow_server()
        if state.backend.follow is not None and await asyncio.to_thread(drained, state.backend):
            if state.healthy or state.last_error != HELD:  # once, not a failure a round
                state.mark_down(HELD)
            state.checked_at = time.time()
            return
        headers = {"Authorization": f"Bearer {state.backend.api_key}"} if state.backend.api_key else {}
        headers.update(IDENTITY)
        url = f"{state.url}/v1/models"
        try:  # bounded as a whole, and capped: a trickling or endless backend cannot hold the gateway
            async with (
                asyncio.timeout(timeout_s),
                client.stream("GET", url, headers=headers, timeout=timeout_s) as resp,
            ):
                resp.raise_for_status()
                models = json_loads(await aread_capped(resp, url, cap=JSON_CAP)).get("data") or []
                if not isinstance(models, list):  # {"data": {...}} or a number is no models list
                    raise ValueError("not a models list")
        except (httpx.HTTPError, ValueError, AttributeError, TimeoutError, BodyTooLarge) as exc:
            state.probe_failures += 1
            # one slow probe on a busy box is not "down"; a backend never seen up is not presumed up
            if state.probe_failures >= 2 or not state.healthy or state.checked_at is None:
                state.mark_down(f"health probe: {probe_problem(exc, timeout_s)}")
            state.checked_at = time.time()
            return
        if models and isinstance(models[0], dict):
            served = models[0].get("id")  # sent as the request's `model`: a name, nothing else
            state.served_model = state.served_model or (
                served if isinstance(served, str) and served else None
            )
            max_len = models[0].get("max_model_len")
            state.server_is("models", (served, models[0].get("root"), max_len))
            fits = isinstance(max_len, int) and not isinstance(max_len, bool) and 0 < max_len <= MAX_MODEL_LEN
            state.max_model_len = max_len if fits else None
        state.mark_up()
        if state.reserves_cap:  # vLLM < 0.32: upgraded in place, its /v1/models entry is the same
            await self._version(client, state, headers, timeout_s)

    @staticmethod
    async def _version(
        client: httpx.AsyncClient, state: BackendState, headers: dict[str, str], timeout_s: float
    ) -> None:
        """The vLLM version of a backend marked ``reserves_cap`` (``GET /version``, asked of no other
        backend): vLLM 0.31 restarted as 0.32 at the same URL, model and context shows nothing else
        that changed. A backend without one (or any failure) says nothing."""
        url = f"{state.url}/version"
        try:
            async with (
                asyncio.timeout(timeout_s),
                client.stream("GET", url, headers=headers, timeout=timeout_s) as resp,
            ):
                if resp.status_code != 200:
                    return
                version = json_loads(await aread_capped(resp, url, cap=JSON_CAP)).get("version")
        except (httpx.HTTPError, ValueError, AttributeError, TimeoutError, BodyTooLarge):
            return
        if isinstance(version, str):
            state.server_is("version", version[:100])

    async def probe_all(self, client: httpx.AsyncClient, timeout_s: float) -> None:
        states = [s for s in self.backends.values() if not self.skip_probe(s)]
        await asyncio.gather(*(self.probe(client, s, timeout_s) for s in states))

    async def recheck(self, client: httpx.AsyncClient, states: list[BackendState], timeout_s: float) -> bool:
        """Every backend of a route is down: probe them again now; True when one is up.

        Requests that arrive meanwhile share the probe in flight, and a backend probed within the last
        second is not probed again (a flood of requests to a dead model costs no flood of probes)."""
        now = time.time()
        waits = []
        for state in states:
            if self.skip_probe(state) or state.checked_since_down(within_s=1.0, now=now):
                continue
            task = self._rechecks.get(state.url)
            if task is None:
                task = asyncio.ensure_future(self._shared(client, state, timeout_s))
                self._rechecks[state.url] = task
            waits.append(asyncio.shield(task))  # a request that goes away leaves the probe to the others
        await asyncio.gather(*waits, return_exceptions=True)
        return any(s.healthy for s in states)

    async def _shared(self, client: httpx.AsyncClient, state: BackendState, timeout_s: float) -> None:
        try:
            await self.probe(client, state, timeout_s)
        finally:
            self._rechecks.pop(state.url, None)

    def soon(self, state: BackendState) -> None:
        """A backend that refused a request's connection (a server restarting): probed each second till
        it answers (for one health interval at most), not out of rotation till the next round."""
        self._soon[state.url] = time.monotonic()

    async def health_loop(self, client: httpx.AsyncClient, interval_s: float, timeout_s: float) -> None:
        due = time.monotonic() + interval_s
        while True:
            await asyncio.sleep(max(0.0, min(QUICK_S, due - time.monotonic())))
            with contextlib.suppress(Exception):
                if time.monotonic() >= due:
                    due = time.monotonic() + interval_s
                    await self.probe_all(client, timeout_s)
                await self._probe_soon(client, interval_s, timeout_s)

    async def _probe_soon(self, client: httpx.AsyncClient, interval_s: float, timeout_s: float) -> None:
        now = time.monotonic()
        for url, since in list(self._soon.items()):
            state = self.backends.get(url)
            if state is None or state.healthy or now - since >= interval_s or self.skip_probe(state):
                del self._soon[url]
        states = [self.backends[url] for url in self._soon]
        await asyncio.gather(*(self.probe(client, s, timeout_s) for s in states))

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {
                "model": alias,
                "requests": st.requests,
                "errors": st.errors,
                "backends": [
                    {**b.snapshot(), "served_model": b.name_for(mine.served_model)}
                    for b, mine in zip(st.backends, st.route.backends, strict=True)
                ],
            }
            for alias, st in self.routes.items()
        ]


def probe_problem(exc: BaseException, timeout_s: float) -> str:
    """A failed probe in words (the status and the 503 show it)."""
    return failure_words(exc, "/v1/models", timeout_s, "an OpenAI models list (JSON)")
