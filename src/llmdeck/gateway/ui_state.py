"""Builds the dashboard's state (:class:`~llmdeck.gateway.ui_schema.UiState`) from the gateway's own objects.

The memory pools: the host's (``/proc/meminfo``: the models on demand, other llmdeck servers, Ollama,
the page cache, free and the rest as "os"), and each GPU's where NVML reports memory (on GB10 it does
not: there the host pool is the budget's). The JSON is built at most once a second (several tabs, or a
script polling fast, cost one build).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmdeck.gateway.model_state import ManagedModel
from llmdeck.gateway.ui_schema import (
    Action,
    BudgetView,
    EventView,
    GatewayView,
    MemoryPool,
    ModelView,
    ReportLink,
    RouteView,
    Segment,
    UiState,
)
from llmdeck.gateway.ui_sources import (
    Cached,
    RouteWindow,
    delta,
    other_servers,
    quantile,
    read_meminfo,
    read_nvml,
    read_ollama,
)

if TYPE_CHECKING:
    from llmdeck.gateway.app import GatewayState

STATE_TTL_S = 1.0


@dataclass
class UiContext:
    """The dashboard's caches, one per app."""

    results_dir: Path
    meminfo: Cached[Any]
    nvml: Cached[Any]
    ollama: Cached[list[tuple[str, int, int]]]
    servers: Cached[list[Any]]
    reports: Cached[list[ReportLink]]
    window: RouteWindow = field(default_factory=RouteWindow)
    last: tuple[float, bytes] | None = None
    tasks: set[Any] = field(default_factory=set)  # actions under way (kept so they are not collected)


def make_context(st: GatewayState, settings: Any) -> UiContext:
    from llmdeck.gateway.ui_reports import scan_reports

    managed = frozenset(m.name for m in st.manager.models.values()) if st.manager else frozenset()
    results = Path(settings.results_dir).expanduser().resolve()
    return UiContext(
        results_dir=results,
        meminfo=Cached(read_meminfo, 1.0, None),
        nvml=Cached(read_nvml, 5.0, None),
        ollama=Cached(read_ollama, 10.0, []),
        servers=Cached(other_servers(settings.servers_dir, managed), 10.0, []),
        reports=Cached(lambda: scan_reports(results), 15.0, []),
    )


async def state_json(st: GatewayState, ctx: UiContext) -> bytes:
    now = time.monotonic()
    if ctx.last is not None and now - ctx.last[0] < STATE_TTL_S:
        return ctx.last[1]
    state = await build_state(st, ctx)
    body = state.model_dump_json(by_alias=True).encode("utf-8")
    ctx.last = (time.monotonic(), body)
    return body


async def build_state(st: GatewayState, ctx: UiContext) -> UiState:
    import llmdeck

    mgr = st.manager
    models = list(mgr.models.values()) if mgr is not None else []
    kind = mgr.budget.kind if mgr is not None else "unified"
    gpu_index = mgr.budget.gpu_index if mgr is not None else 0
    mem, nvml = await ctx.meminfo.get(), await ctx.nvml.get()
    ollama, servers = await ctx.ollama.get(), await ctx.servers.get()
    pools = []
    if mem is not None:
        here = mgr is not None and kind != "gpu"
        pools.append(host_pool(mem, models if here else [], servers, ollama, here))
    for gpu in nvml.gpus if nvml is not None and nvml.available else []:
        if gpu.total_bytes is not None:
            here = kind == "gpu" and gpu.index == gpu_index
            pools.append(gpu_pool(gpu, models if here else [], ollama if here else [], here))
    budget = None
    if mgr is not None:
        b = mgr.budget
        held = sum(m.held(b.kind) for m in models)
        budget = BudgetView(kind=b.kind, memory_gib=b.memory_gib, reserve_gib=b.reserve_gib, held_bytes=held)
    return UiState(
        generated_at=time.time(),
        gateway=GatewayView(
            uptime_s=round(time.time() - st.started_at, 1),
            keys_required=st.keys.enabled,
            insecure=st.insecure,
            version=llmdeck.__version__,
        ),
        pools=pools,
        budget=budget,
        models=[model_view(st, m, kind) for m in models],
        routes=route_views(st, ctx),
        events=[EventView(**vars(e)) for e in mgr.events.newest(50)] if mgr is not None else [],
        reports=await ctx.reports.get(),
    )


def _model_segments(models: list[ManagedModel], kind: str) -> list[Segment]:
    out = []
    for m in models:
        held = m.held(kind)
        if held <= 0:
            continue
        now = m.measured if m.state == "running" and m.measured else held
        planned = m.backend.planned.bytes
        out.append(
            Segment(
                kind="model",
                name=m.name,
                bytes=now,
                planned_bytes=planned,
                measured_bytes=m.measured,
                state=m.state,
            )
        )
    return out


def host_pool(
    mem: Any, models: list[ManagedModel], servers: list[Any], ollama: list[tuple[str, int, int]], budget: bool
) -> MemoryPool:
    segments = _model_segments(models, "unified")
    segments += [Segment(kind="server", name=s.name, bytes=s.bytes) for s in servers if s.bytes > 0]
    # Ollama's host share: what it holds beyond the GPU (size_vram > size has been seen, ollama#17251)
    segments += [
        Segment(kind="ollama", name=f"ollama:{n}", bytes=size - vram)
        for n, size, vram in ollama
        if size > vram
    ]
    segments = [s for s in segments if s.bytes > 0]
    used = max(0, mem.total - mem.free - mem.page_cache)
    known = sum(s.bytes for s in segments)
    cache = max(0, mem.page_cache - max(0, known - used))  # PSS counts mapped files the cache holds too
    segments.append(Segment(kind="os", name="OS and other processes", bytes=max(0, used - known)))
    segments.append(Segment(kind="page_cache", name="page cache", bytes=cache))
    segments.append(Segment(kind="free", name="free", bytes=mem.free))
    return MemoryPool(
        name="host",
        kind="host",
        source="/proc/meminfo",
        total_bytes=mem.total,
        budget=budget,
        segments=segments,
    )


def gpu_pool(
    gpu: Any, models: list[ManagedModel], ollama: list[tuple[str, int, int]], budget: bool
) -> MemoryPool:
    segments = _model_segments(models, "gpu")
    segments += [Segment(kind="ollama", name=f"ollama:{n}", bytes=vram) for n, _, vram in ollama if vram > 0]
    used = gpu.used_bytes or 0
    known = sum(s.bytes for s in segments)
    segments.append(Segment(kind="os", name="other processes", bytes=max(0, used - known)))
    segments.append(Segment(kind="free", name="free", bytes=gpu.free_bytes or 0))
    return MemoryPool(
        name=f"gpu{gpu.index}",
        kind="gpu",
        source="nvml",
        total_bytes=gpu.total_bytes or 0,
        budget=budget,
        segments=segments,
    )


def actions_for(m: ManagedModel) -> list[Action]:
    if m.state == "starting" or (m.state in {"stopped", "failed"} and m.bringing_up):
        return [] if m.stop_asked else ["stop"]  # stop: the start ends, the engine stopped if launched
    if m.state in {"stopped", "failed"}:
        return ["start"]
    if m.state == "sleeping":
        return ["wake", "stop"]
    if m.state == "running":
        return ["stop", "sleep"] if m.backend.sleep_level else ["stop"]
    return []


def model_view(st: GatewayState, m: ManagedModel, kind: str) -> ModelView:
    aliases = [r.alias for r in st.loaded.routes if any(b.url == m.url for b in r.backends)]
    return ModelView(
        name=m.name,
        aliases=aliases,
        state=m.state,
        progress=m.progress if m.state == "starting" or m.waiting else None,
        planned_bytes=m.backend.planned.bytes,
        planned_how=m.backend.planned.how,
        measured_bytes=m.measured,
        held_bytes=m.held(kind),
        in_flight=m.inflight,
        queue=m.waiting,
        last_used=m.last_used,
        starts=m.starts,
        evictions=m.evictions,
        wakes=m.wakes,
        start_seconds=round(m.start_seconds, 1) if m.start_seconds else None,
        keep=m.backend.keep,
        ttl_s=m.backend.ttl_s,
        sleep_level=m.backend.sleep_level,
        last_error=m.last_error,
        actions=actions_for(m),
    )


def route_views(st: GatewayState, ctx: UiContext) -> list[RouteView]:
    covered, latest, then = ctx.window.update(st.metrics)
    out = []
    for alias, rs in st.router.routes.items():
        now = latest.get(alias)
        d = delta(now, then.get(alias)) if now is not None else None
        rate = covered >= 1.0 and d is not None
        p50 = quantile(0.5, d.ttft) if d is not None else None
        p95 = quantile(0.95, d.ttft) if d is not None else None
        out.append(
            RouteView(
                alias=alias,
                backends=len(rs.backends),
                healthy=sum(b.healthy for b in rs.backends),
                in_flight=int(now.in_flight) if now is not None else 0,
                requests=rs.requests,
                errors=rs.errors,
                window_s=round(covered, 1),
                requests_per_s=round(d.requests / covered, 3) if rate and d else None,
                ttft_p50_ms=round(p50 * 1000, 1) if p50 is not None else None,
                ttft_p95_ms=round(p95 * 1000, 1) if p95 is not None else None,
                prompt_tokens=int(now.prompt) if now is not None else 0,
                completion_tokens=int(now.completion) if now is not None else 0,
                completion_tokens_per_s=round(d.completion / covered, 2) if rate and d else None,
            )
        )
    return out
