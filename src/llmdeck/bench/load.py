"""Load generation: arrivals (Poisson/gamma like vLLM), a concurrency semaphore, warmup,
count or duration limits, and a watch that aborts when the server goes away."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from llmdeck.bench.result_schema import RequestRecord, ScenarioSpec
from llmdeck.bench.workloads import SessionHistory, WorkItem
from llmdeck.client.errors import ClientEndpointError
from llmdeck.client.openai import OpenAIClient
from llmdeck.client.types import StreamResult
from llmdeck.errors import InternalError

# Failure kinds that suggest the server itself is gone: trigger a health check.
_SERVER_GONE_KINDS = {"unreachable", "dropped"}


Rng = np.random.Generator | np.random.RandomState


def vllm_arrival_rng(seed: int) -> np.random.RandomState:
    """The random stream ``vllm bench serve --seed SEED`` draws its request gaps from: it seeds NumPy's
    legacy global state (``np.random.seed(args.seed)``) and draws one ``np.random.gamma`` per request
    (its random dataset has a generator of its own). With it, one seed gives the same arrival times in
    both tools, as it gives the same prompts."""
    return np.random.RandomState(seed)


def arrival_offsets(n: int, rate: float | None, burstiness: float, rng: Rng) -> list[float]:
    """Cumulative send times (s) of ``n`` requests, as ``vllm bench serve`` schedules them:
    gamma(shape=burstiness, scale=1/(rate*burstiness)) gaps, rescaled so the last one lands at
    ``n / rate``. ``rate=None`` sends everything at once."""
    if not rate or n <= 0:
        return [0.0] * n
    theta = 1.0 / (rate * burstiness)
    gaps = rng.gamma(shape=burstiness, scale=theta, size=n)
    cum = np.cumsum(gaps)
    if cum[-1] > 0:
        cum = cum * ((n / rate) / cum[-1])
    return [float(x) for x in cum]


def arrival_stream(rate: float | None, burstiness: float, rng: Rng) -> Iterator[float]:
    """Unbounded cumulative send times for duration-limited runs (no rescaling)."""
    t = 0.0
    while True:
        if rate:
            t += float(rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)))
        yield t


class ServerGone(InternalError):
    """Raised inside a scenario when the server stopped answering /health."""


class ScenarioRun:
    """Runs one scenario; its records survive cancellation so a partial result can be written."""

    def __init__(
        self,
        client: OpenAIClient,
        spec: ScenarioSpec,
        model: str,
        items: list[WorkItem],
        *,
        warmup_items: list[WorkItem] | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        on_dispatch: Callable[[int], None] | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.model = model
        self.items = items
        self.warmup_items = warmup_items or []
        self.on_record = on_record
        self.on_dispatch = on_dispatch
        self.ignore_eos = spec.ignore_eos and spec.workload != "jsonl"
        self.sampling = spec.sampling() or None
        self.records: dict[int, RequestRecord] = {}
        self.inflight: dict[int, tuple[WorkItem, float, float | None]] = {}
        self.dispatched = 0
        self.t0 = 0.0
        self.t_last = 0.0
        self.gone = asyncio.Event()
        self.gone_reason = ""
        self._checking = False
        self.suspect = False  # a request failed in a way that suggests the server is gone
        self._freed = asyncio.Event()
        self._sem: asyncio.Semaphore | contextlib.nullcontext[None] = (
            asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else contextlib.nullcontext()
        )

    # ---- one request ---------------------------------------------------------------------

    async def _send(self, item: WorkItem, messages: list[dict[str, Any]] | None = None) -> StreamResult:
        if messages is None and item.messages is not None:
            messages = item.messages
        if messages is not None:
            return await self.client.stream_chat(
                self.model,
                messages,
                max_tokens=item.output_len,
                ignore_eos=self.ignore_eos,
                extra=self.sampling,
            )
        assert item.prompt is not None
        return await self.client.stream_completion(
            self.model,
            item.prompt,
            max_tokens=item.output_len,
            ignore_eos=self.ignore_eos,
            extra=self.sampling,
        )

    async def _one(
        self, idx: int, item: WorkItem, arrival: float, messages: list[dict[str, Any]] | None = None
    ) -> StreamResult | None:
        self.inflight[idx] = (item, arrival, None)
        async with self._sem:
            start = time.perf_counter()
            self.inflight[idx] = (item, arrival, start)
            try:
                res = await self._send(item, messages)
            except ClientEndpointError as exc:
                end = time.perf_counter()
                self._finish(
                    RequestRecord(
                        index=idx,
                        ok=False,
                        error=exc.message,
                        error_kind=exc.kind,
                        session=item.session,
                        turn=item.turn,
                        arrival=arrival - self.t0,
                        start=start - self.t0,
                        queue_time=start - arrival,
                        end=end - self.t0,
                        prompt_len=item.prompt_len,
                        output_len=item.output_len,
                    )
                )
                if exc.kind in _SERVER_GONE_KINDS:
                    self.suspect = True
                    self.check_server()
                return None
        end = time.perf_counter()
        t = res.chunk_times
        self._finish(
            RequestRecord(
                index=idx,
                ok=True,
                session=item.session,
                turn=item.turn,
                arrival=arrival - self.t0,
                start=res.start - self.t0,
                queue_time=res.start - arrival,
                ttft=t[0] - res.start,
                latency=t[-1] - res.start,
                end=end - self.t0,
                itl=[t[i] - t[i - 1] for i in range(1, len(t))],
                prompt_len=item.prompt_len,
                prompt_tokens=res.prompt_tokens,
                output_len=item.output_len,
                output_tokens=res.completion_tokens,
                num_chunks=len(t),
                finish_reason=res.finish_reason,
            )
        )
        return res

    def _finish(self, rec: RequestRecord) -> None:
        self.inflight.pop(rec.index, None)
        self._freed.set()
        self.records[rec.index] = rec
        if rec.ok and rec.start is not None and rec.latency is not None:
            self.t_last = max(self.t_last, rec.start + rec.latency + self.t0)
        self.t_last = max(self.t_last, (rec.end or 0.0) + self.t0)
        if self.on_record is not None:
            self.on_record(rec)

    # ---- server watch --------------------------------------------------------------------

    def check_server(self) -> None:
        """Probe /health in the background; set ``gone`` when the server does not answer."""
        if self._checking or self.gone.is_set():
            return
        self._checking = True
        asyncio.get_running_loop().create_task(self._check())

    async def _check(self) -> None:
        try:
            for _attempt in range(2):
                if await self._health():
                    return
                await asyncio.sleep(0.5)
            self.gone_reason = f"the server at {self.client.base_url} stopped answering /health"
            self.gone.set()
        finally:
            self._checking = False

    async def _health(self) -> bool:
        """Alive unless it does not answer or answers 5xx (vLLM's dead engine): a server with no /health
        route (404) or behind a key (401) answers, and had been called gone while it served."""
        try:
            resp = await self.client._http.get("/health", timeout=3.0)
        except Exception:
            return False
        return resp.status_code < 500

    # ---- the run -------------------------------------------------------------------------

    async def warmup(self) -> None:
        if not self.warmup_items:
            return
        sem = asyncio.Semaphore(self.spec.max_concurrency or len(self.warmup_items))

        async def w(item: WorkItem) -> None:
            async with sem:
                with contextlib.suppress(ClientEndpointError):
                    await self._send(
                        item, SessionHistory(item.system_text).ask(item) if item.user_text else None
                    )

        await asyncio.gather(*(w(i) for i in self.warmup_items))

    async def run(self) -> float:
        """Dispatch everything; returns the duration (first dispatch -> last completion).

        Raises :class:`ServerGone` when the server disappeared (records so far are kept)."""
        spec = self.spec
        rng = np.random.default_rng(spec.seed + 7919)
        tasks: list[asyncio.Task[Any]] = []
        self.t0 = time.perf_counter()
        self.t_last = self.t0
        dispatcher = asyncio.create_task(self._dispatch(tasks, rng))
        gone = asyncio.create_task(self.gone.wait())
        pending: asyncio.Future[list[Any]] | None = None
        try:
            await asyncio.wait({dispatcher, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not self.gone.is_set() and tasks:
                pending = asyncio.gather(*tasks, return_exceptions=True)
                waitables: list[asyncio.Future[Any]] = [pending, gone]
                await asyncio.wait(waitables, return_when=asyncio.FIRST_COMPLETED)
            if not self.gone.is_set() and self.suspect and not await self._health():
                await asyncio.sleep(0.5)
                if not await self._health():
                    self.gone_reason = f"the server at {self.client.base_url} stopped answering /health"
                    self.gone.set()
            if self.gone.is_set():
                raise ServerGone(self.gone_reason)
        finally:
            waits: list[asyncio.Future[Any]] = [dispatcher, gone, *tasks]
            if pending is not None:
                waits.append(pending)
            for t in waits:
                if not t.done():
                    t.cancel()
            for t in waits:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        return max(self.t_last - self.t0, 1e-9)

    async def _sleep_until(self, offset: float) -> bool:
        """Wait until ``t0 + offset``; False when the duration limit is past by then (or already
        past: a closed loop's offsets stay at 0)."""
        limit = self.spec.duration_s
        if limit is not None and max(offset, time.perf_counter() - self.t0) >= limit:
            return False
        delay = self.t0 + offset - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        return True

    async def _dispatch(self, tasks: list[asyncio.Task[Any]], rng: np.random.Generator) -> None:
        spec = self.spec
        if spec.workload in ("multi-turn", "agent-sessions"):
            await self._dispatch_sessions(tasks, rng)
            return
        n = len(self.items)
        if spec.duration_s is None:
            arrivals = vllm_arrival_rng(spec.seed)
            times: Iterator[float] = iter(arrival_offsets(n, spec.request_rate, spec.burstiness, arrivals))
            limit: int | None = n
        else:
            times = arrival_stream(spec.request_rate, spec.burstiness, rng)
            limit = None
        for i, offset in enumerate(times):
            if limit is not None and i >= limit:
                break
            if not await self._sleep_until(offset):
                break
            item = self.items[i % n]
            tasks.append(asyncio.create_task(self._one(i, item, time.perf_counter())))
            self.dispatched = i + 1
            if self.on_dispatch is not None:
                self.on_dispatch(i + 1)
            if limit is None and spec.request_rate is None:
                # duration-limited closed loop: do not queue more than the concurrency allows
                cap = spec.max_concurrency or len(self.items)
                await asyncio.sleep(0)  # the new task registers itself in inflight before the cap is read
                while len(self.inflight) >= cap:
                    self._freed.clear()
                    await self._freed.wait()

    async def _dispatch_sessions(self, tasks: list[asyncio.Task[Any]], rng: np.random.Generator) -> None:
        sessions: dict[int, list[WorkItem]] = {}
        for it in self.items:
            sessions.setdefault(it.session or 0, []).append(it)
        offsets = arrival_offsets(len(sessions), self.spec.request_rate, self.spec.burstiness, rng)
        for (_sid, turns), offset in zip(sorted(sessions.items()), offsets, strict=True):
            if not await self._sleep_until(offset):
                break
            tasks.append(asyncio.create_task(self._session(turns)))
            self.dispatched += len(turns)
            if self.on_dispatch is not None:
                self.on_dispatch(self.dispatched)

    async def _session(self, turns: list[WorkItem]) -> None:
        history = SessionHistory(turns[0].system_text if turns else None)
        for k, item in enumerate(turns):
            if self.spec.duration_s is not None and time.perf_counter() - self.t0 >= self.spec.duration_s:
                return
            res = await self._one(item.index, item, time.perf_counter(), history.ask(item))
            if res is None:
                for later in turns[k + 1 :]:
                    self._finish(
                        RequestRecord(
                            index=later.index,
                            ok=False,
                            error="not sent: an earlier turn of this session failed",
                            error_kind="not_run",
                            session=later.session,
                            turn=later.turn,
                            prompt_len=later.prompt_len,
                            output_len=later.output_len,
                        )
                    )
                return
            history.reply(res.text or res.reasoning)

    def unfinished(self, kind: str, reason: str) -> list[RequestRecord]:
        """Records for every request that did not finish: in flight (failed) or never sent."""
        now = time.perf_counter()
        out: list[RequestRecord] = []
        for idx, (item, arrival, start) in sorted(self.inflight.items()):
            sent = start is not None  # one still waiting for a slot (--max-concurrency) was never sent
            out.append(
                RequestRecord(
                    index=idx,
                    ok=False,
                    error=f"in flight when the run stopped: {reason}" if sent else f"not sent: {reason}",
                    error_kind=kind if sent else "not_run",
                    session=item.session,
                    turn=item.turn,
                    arrival=arrival - self.t0,
                    start=None if start is None else start - self.t0,
                    queue_time=None if start is None else start - arrival,
                    end=now - self.t0,
                    prompt_len=item.prompt_len,
                    output_len=item.output_len,
                )
            )
        done = set(self.records) | set(self.inflight)
        if self.spec.duration_s is None:
            for item in self.items:
                if item.index not in done:
                    out.append(
                        RequestRecord(
                            index=item.index,
                            ok=False,
                            error=f"not sent: {reason}",
                            error_kind="not_run",
                            session=item.session,
                            turn=item.turn,
                            prompt_len=item.prompt_len,
                            output_len=item.output_len,
                        )
                    )
        return out
