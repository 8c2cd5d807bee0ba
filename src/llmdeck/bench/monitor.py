"""Sampling the server's /metrics and the host's memory while a scenario runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmdeck.bench.result_schema import GpuMemory, HostFacts, HostSummary, ServerMetricsSummary, Timeline
from llmdeck.client.prom import MetricsSnapshot, parse_metrics
from llmdeck.runtime.host import NVML_NOT_REPORTED as NVML_NOT_REPORTED
from llmdeck.runtime.host import NvmlSampler, read_meminfo
from llmdeck.util.units import GIB as GIB

# ---- host ----------------------------------------------------------------------------------


@dataclass
class HostSample:
    t: float
    mem_available: int | None
    swap_used: int | None
    page_cache: int | None
    gpu_used: list[int | None] = field(default_factory=list)


_Nvml = NvmlSampler  # the old name (tests, callers)


def sample_host(nvml: NvmlSampler | None = None) -> HostSample:
    try:
        mem = read_meminfo()
        avail: int | None = mem.available
        cached: int | None = mem.page_cache
        swap: int | None = mem.swap_used
    except (OSError, ValueError):
        avail = cached = swap = None
    return HostSample(
        t=time.perf_counter(),
        mem_available=avail,
        swap_used=swap,
        page_cache=cached,
        gpu_used=nvml.used() if nvml and nvml.ok else [],
    )


def host_facts() -> HostFacts:
    nv = NvmlSampler()
    try:
        total: float | None = round(read_meminfo().total / GIB, 2)
    except (OSError, ValueError):
        total = None
    return HostFacts(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        cpu_count=os.cpu_count(),
        mem_total_gib=total,
        gpus=nv.names,
    )


def summarize_host(samples: list[HostSample], nvml: NvmlSampler | None) -> HostSummary:
    def gib(v: float | None) -> float | None:
        return None if v is None else round(v / GIB, 3)

    avail = [s.mem_available for s in samples if s.mem_available is not None]
    swap = [s.swap_used for s in samples if s.swap_used is not None]
    cache = [s.page_cache for s in samples if s.page_cache is not None]
    gpus: list[GpuMemory] = []
    if nvml and nvml.ok:
        for i, name in enumerate(nvml.names):
            used = [u for s in samples if i < len(s.gpu_used) and (u := s.gpu_used[i]) is not None]
            note = nvml.notes[i]
            gpus.append(
                GpuMemory(
                    index=i,
                    name=name,
                    used_gib_max=gib(max(used)) if used else None,
                    total_gib=gib(nvml.totals[i]),
                    note=note if note else (None if used else NVML_NOT_REPORTED),
                )
            )
    return HostSummary(
        samples=len(samples),
        mem_available_gib_min=gib(min(avail)) if avail else None,
        mem_available_gib_start=gib(avail[0]) if avail else None,
        swap_used_gib_max=gib(max(swap)) if swap else None,
        page_cache_gib_max=gib(max(cache)) if cache else None,
        gpus=gpus,
        gpu_note=nvml.note if nvml else None,
    )


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def _since(v: float | None, first: float | None) -> float | None:
    return None if v is None or first is None else v - first


def _interval_hit_rates(snaps: list[MetricsSnapshot]) -> list[float | None]:
    out: list[float | None] = []
    prev: MetricsSnapshot | None = None
    for s in snaps:
        rate: float | None = None
        if "cache_hit_rate" in s.values:
            rate = 100.0 * s.values["cache_hit_rate"]
        elif prev is not None and {"prefix_queries", "prefix_hits"} <= s.values.keys() & prev.values.keys():
            dq = s.values["prefix_queries"] - prev.values["prefix_queries"]
            dh = s.values["prefix_hits"] - prev.values["prefix_hits"]
            rate = 100.0 * dh / dq if dq > 0 else None
        out.append(_r(rate, 2))
        prev = s
    return out


def build_timeline(snaps: list[MetricsSnapshot], host: list[HostSample], t0: float) -> Timeline:
    """The samples as columns, times relative to ``t0`` (the scenario's start, perf_counter)."""
    first_pre = next((s.values["preemptions"] for s in snaps if "preemptions" in s.values), None)

    def col(key: str, scale: float = 1.0, nd: int = 3) -> list[float | None]:
        return [_r(s.values[key] * scale, nd) if key in s.values else None for s in snaps]

    def gib(v: int | None) -> float | None:
        return None if v is None else round(v / GIB, 3)

    n_gpu = max((len(h.gpu_used) for h in host), default=0)
    return Timeline(
        server_t=[round(s.t - t0, 3) for s in snaps],
        running=col("running"),
        waiting=col("waiting"),
        kv_usage_pct=col("kv_usage", 100.0, 2),
        prefix_hit_rate_pct=_interval_hit_rates(snaps),
        preemptions=[_since(s.values.get("preemptions"), first_pre) for s in snaps],
        host_t=[round(h.t - t0, 3) for h in host],
        mem_available_gib=[gib(h.mem_available) for h in host],
        page_cache_gib=[gib(h.page_cache) for h in host],
        swap_used_gib=[gib(h.swap_used) for h in host],
        gpu_used_gib=[
            [gib(h.gpu_used[i]) if i < len(h.gpu_used) else None for h in host] for i in range(n_gpu)
        ],
    )


# ---- server metrics --------------------------------------------------------------------------

_REPORTED = (
    "running",
    "waiting",
    "kv_usage",
    "prefix_hits",
    "preemptions",
    "prompt_tokens",
    "generation_tokens",
)


def summarize_server(
    snaps: list[MetricsSnapshot], interval_s: float, note: str | None = None
) -> ServerMetricsSummary:
    """Ranges of the gauges and deltas of the counters between the first and the last scrape."""
    if not snaps:
        return ServerMetricsSummary(samples=0, interval_s=interval_s, note=note or "no /metrics sample")
    first, last = snaps[0], snaps[-1]
    dt = last.t - first.t

    def series(key: str) -> list[float]:
        return [s.values[key] for s in snaps if key in s.values]

    def delta(key: str) -> float | None:
        if key in first.values and key in last.values:
            return max(0.0, last.values[key] - first.values[key])
        return None

    def rate(key: str) -> float | None:
        d = delta(key)
        return d / dt if d is not None and dt > 0 else None

    def mean_ms(kind: str) -> float | None:
        total, n = delta(f"{kind}_sum"), delta(f"{kind}_count")
        return 1000.0 * total / n if total is not None and n else None

    running, waiting, kv = series("running"), series("waiting"), series("kv_usage")
    hit_rate: float | None = None
    dq, dh = delta("prefix_queries"), delta("prefix_hits")
    if dq and dh is not None:
        hit_rate = 100.0 * dh / dq
    elif "cache_hit_rate" in last.values:
        hit_rate = 100.0 * last.values["cache_hit_rate"]
    never_drained: bool | None = None
    if len(waiting) >= 4:
        tail = waiting[len(waiting) // 2 :]
        never_drained = all(w > 0 for w in tail)
    present = set().union(*(s.values.keys() for s in snaps))
    if "cache_hit_rate" in present:
        present.add("prefix_hits")
    return ServerMetricsSummary(
        engine=next((s.engine for s in snaps if s.engine), None),
        samples=len(snaps),
        interval_s=interval_s,
        running_max=max(running) if running else None,
        running_mean=sum(running) / len(running) if running else None,
        waiting_max=max(waiting) if waiting else None,
        waiting_mean=sum(waiting) / len(waiting) if waiting else None,
        waiting_last=waiting[-1] if waiting else None,
        waiting_never_drained=never_drained,
        kv_cache_usage_max_pct=100.0 * max(kv) if kv else None,
        prefix_cache_hit_rate_pct=hit_rate,
        preemptions=delta("preemptions"),
        prompt_tokens_per_s=rate("prompt_tokens"),
        generation_tokens_per_s=rate("generation_tokens"),
        server_mean_ttft_ms=mean_ms("ttft"),
        server_mean_itl_ms=mean_ms("itl"),
        not_reported=[k for k in _REPORTED if k not in present],
        note=note,
    )


class Monitor:
    """Background sampler: ``/metrics`` and host memory every ``interval_s`` until stopped."""

    def __init__(
        self,
        client: Any,
        interval_s: float = 1.0,
        *,
        scrape_metrics: bool = True,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.on_failure = on_failure
        self.interval_s = interval_s
        self.scrape_metrics = scrape_metrics
        self.snaps: list[MetricsSnapshot] = []
        self.host: list[HostSample] = []
        self.note: str | None = None
        self.metrics_failures = 0
        self._task: asyncio.Task[None] | None = None
        self._nvml: NvmlSampler | None = None

    async def start(self) -> None:
        self._nvml = await asyncio.to_thread(NvmlSampler)
        await self._sample()
        self._task = asyncio.create_task(self._loop())

    async def _sample(self) -> None:
        self.host.append(sample_host(self._nvml))
        if not self.scrape_metrics:
            return
        try:
            text = await self.client.metrics_text()
        except Exception:
            self.metrics_failures += 1
            if self.on_failure is not None:
                self.on_failure()
            return
        if text is None:
            self.note = "the server has no /metrics endpoint"
            self.scrape_metrics = False
            return
        t = time.perf_counter()
        self.snaps.append(parse_metrics(text, t))  # a regex pass + a few lines: well under 1 ms

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self._sample()

    async def stop(self) -> tuple[ServerMetricsSummary, HostSummary]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._sample(), timeout=3.0)
        return self.summaries()

    def summaries(self) -> tuple[ServerMetricsSummary, HostSummary]:
        note = self.note
        if self.scrape_metrics and not self.snaps:
            note = note or "no /metrics sample could be read"
        return summarize_server(self.snaps, self.interval_s, note), summarize_host(self.host, self._nvml)

    def timeline(self, t0: float) -> Timeline:
        """Every sample so far, on the clock of a scenario that started at ``t0`` (perf_counter)."""
        return build_timeline(self.snaps, self.host, t0 or (self.host[0].t if self.host else 0.0))
