"""Sweeps: the scenarios of a result that differ only in load (``--max-concurrency 1,4,16`` or
``--request-rate 1,2,4``), as latency against load, the throughput-latency Pareto frontier with its
knee, and goodput under the SLOs.

The Pareto view follows ``vllm bench sweep plot_pareto``: x = tokens/s per user (1000 / mean TPOT),
y = output tokens/s of the server; both are better higher, and a point is on the frontier when no
other point is better on both. The knee is the frontier point farthest from the straight line
between the frontier's ends, both axes scaled to [0, 1] (the "kneedle" rule): past it, more load
buys little throughput for much interactivity.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from llmdeck.bench.html.series import per_request_ms
from llmdeck.bench.html.view import Chart, Num, num
from llmdeck.bench.result_schema import BenchResult, ScenarioResult


class SweepPoint(BaseModel):
    index: int = Field(description="The scenario's index in the result.")
    label: str
    setting: str = Field(description='The swept value, e.g. "c8" or "4 req/s".')
    load: float = Field(description="x of the latency-vs-load chart.")
    request_throughput: Num
    output_throughput: Num
    mean_ttft: Num
    p99_ttft: Num
    mean_tpot: Num
    per_user_tps: float | None = Field(None, description="1000 / mean TPOT (ms).")
    goodput: Num | None = None
    on_frontier: bool = False
    knee: bool = False


class SweepView(BaseModel):
    axis: str = Field(description="What varies: max concurrency, request rate, or both.")
    load_label: str
    points: list[SweepPoint]
    knee_note: str
    goodput_note: str
    charts: list[Chart] = Field(default_factory=list)


def _group_key(sr: ScenarioResult) -> tuple[object, ...]:
    s = sr.spec
    return (s.workload, s.endpoint, s.input_len, s.output_len, s.range_ratio, s.prefix_len, s.num_turns)


def _per_request_limits(result: BenchResult) -> dict[str, float]:
    """The verdict's latency limits (``ttft_p99=10`` s, ``tpot_mean=0.15`` s) as per-request limits in ms."""
    out: dict[str, float] = {}
    for rule, limit in result.slo.items():
        m = re.match(r"^(ttft|tpot|e2el)_", rule)
        if m:
            out[m.group(1)] = min(out.get(m.group(1), float("inf")), limit * 1000.0)
    return out


def goodput_of(sr: ScenarioResult, limits_ms: dict[str, float]) -> float | None:
    """Requests/s whose TTFT, TPOT and E2EL are each within its limit (vLLM's goodput rule; TPOT of a
    one-token request counts as 0)."""
    m = sr.metrics
    if m is None or not sr.requests or not limits_ms or m.duration_s <= 0:
        return None
    good = 0
    for r in sr.requests:
        if not r.ok:
            continue
        v = per_request_ms([r])
        vals = {"ttft": v["ttft"][0], "e2el": v["e2el"][0], "tpot": v["tpot"][0] if v["tpot"] else 0.0}
        good += all(vals[k] <= lim for k, lim in limits_ms.items())
    return good / m.duration_s


def _sweep_group(result: BenchResult) -> list[tuple[int, ScenarioResult]]:
    groups: dict[tuple[object, ...], list[tuple[int, ScenarioResult]]] = {}
    for i, sr in enumerate(result.scenarios):
        if sr.metrics is not None and sr.metrics.completed:
            groups.setdefault(_group_key(sr), []).append((i, sr))
    best: list[tuple[int, ScenarioResult]] = []
    for members in groups.values():
        loads = {(sr.spec.request_rate, sr.spec.max_concurrency) for _, sr in members}
        if len(loads) >= 2 and len(members) > len(best):
            best = members
    return best


def mark_frontier(points: list[SweepPoint]) -> str:
    """Set ``on_frontier`` and ``knee``; returns a sentence on the knee."""
    pts = [p for p in points if p.per_user_tps is not None and p.output_throughput.value is not None]
    pts.sort(key=lambda p: (-(p.per_user_tps or 0.0), -(p.output_throughput.value or 0.0)))
    frontier: list[SweepPoint] = []
    best_y = float("-inf")
    for p in pts:
        y = p.output_throughput.value or 0.0
        if y > best_y:
            frontier.append(p)
            best_y = y
    for p in frontier:
        p.on_frontier = True
    if len(frontier) < 3:
        return f"no knee: the frontier has {len(frontier)} point(s); a knee needs 3 or more"
    xs = [p.per_user_tps or 0.0 for p in frontier]
    ys = [p.output_throughput.value or 0.0 for p in frontier]
    sx, sy = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    nx = [(x - min(xs)) / sx for x in xs]
    ny = [(y - min(ys)) / sy for y in ys]
    # distance from the chord between the first and last frontier points (normalised axes)
    x0, y0, x1, y1 = nx[0], ny[0], nx[-1], ny[-1]
    norm = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5 or 1.0
    dist = [
        abs((y1 - y0) * x - (x1 - x0) * y + x1 * y0 - y1 * x0) / norm for x, y in zip(nx, ny, strict=True)
    ]
    k = max(range(1, len(frontier) - 1), key=lambda i: dist[i])
    frontier[k].knee = True
    p = frontier[k]
    return (
        f"knee at {p.setting}: {p.output_throughput.text} output tok/s at {p.per_user_tps:.1f} tok/s "
        f"per user (mean TPOT {p.mean_tpot.text})"
    )


def _setting(sr: ScenarioResult, axis: str) -> str:
    rate = f"{sr.spec.request_rate:g} req/s" if sr.spec.request_rate else "inf req/s"
    conc = f"c{sr.spec.max_concurrency}" if sr.spec.max_concurrency else "c∞"
    return conc if axis == "max concurrency" else rate if axis == "request rate" else f"{rate} {conc}"


def _goodput(result: BenchResult, members: list[tuple[int, ScenarioResult]]) -> tuple[list[Num | None], str]:
    recorded = [sr.metrics.request_goodput if sr.metrics else None for _, sr in members]
    if all(g is not None for g in recorded):
        m0 = members[0][1].metrics
        slos = ", ".join(f"{k} ≤ {v:g} ms" for k, v in (m0.goodput_slos_ms if m0 else {}).items())
        nums: list[Num | None] = [
            num(g, "rate2", f"0:scenarios.{i}.metrics.request_goodput")
            for g, (i, _) in zip(recorded, members, strict=True)
        ]
        return nums, f"goodput: requests/s with {slos} (bench --goodput, vLLM's definition)"
    limits = _per_request_limits(result)
    if not limits:
        return [None] * len(
            members
        ), "goodput: not computed (no --goodput SLOs and no latency rule in the verdict)"
    vals = [goodput_of(sr, limits) for _, sr in members]
    slos = ", ".join(f"{k} ≤ {v:g} ms" for k, v in limits.items())
    note = f"goodput: requests/s with {slos} per request (the verdict's limits; the run had no --goodput)"
    return [None if v is None else num(v, "rate2") for v in vals], note


def sweep_view(result: BenchResult) -> SweepView | None:
    """The sweep in a result, or None when no two finished scenarios differ only in load."""
    members = _sweep_group(result)
    if not members:
        return None
    rates = {sr.spec.request_rate for _, sr in members}
    concs = {sr.spec.max_concurrency for _, sr in members}
    axis = (
        "both"
        if len(rates) > 1 and len(concs) > 1
        else "request rate"
        if len(rates) > 1
        else "max concurrency"
    )
    by_setting = (axis == "max concurrency" and None not in concs) or (
        axis == "request rate" and None not in rates
    )
    load_label = {"max concurrency": "max concurrency", "request rate": "request rate (req/s)"}.get(axis, "")
    if not by_setting:
        load_label = "achieved requests/s"
    goodputs, goodput_note = _goodput(result, members)
    points = []
    for (i, sr), gp in zip(members, goodputs, strict=True):
        m = sr.metrics
        assert m is not None
        base = f"0:scenarios.{i}.metrics"
        load = m.request_throughput
        if by_setting:
            load = float(
                (sr.spec.max_concurrency if axis == "max concurrency" else sr.spec.request_rate) or 0
            )
        tpot = m.tpot_ms.mean if m.tpot_ms else None
        points.append(
            SweepPoint(
                index=i,
                label=sr.spec.label(),
                setting=_setting(sr, axis),
                load=load,
                request_throughput=num(m.request_throughput, "rate2", f"{base}.request_throughput"),
                output_throughput=num(m.output_throughput, "rate", f"{base}.output_throughput"),
                mean_ttft=num(m.ttft_ms.mean if m.ttft_ms else None, "ms", f"{base}.ttft_ms.mean"),
                p99_ttft=num(m.ttft_ms.p(99) if m.ttft_ms else None, "ms", f"{base}.ttft_ms.percentiles.p99"),
                mean_tpot=num(tpot, "ms2", f"{base}.tpot_ms.mean"),
                per_user_tps=1000.0 / tpot if tpot else None,
                goodput=gp,
            )
        )
    points.sort(key=lambda p: p.load)
    knee_note = mark_frontier(points)
    return SweepView(
        axis=axis, load_label=load_label, points=points, knee_note=knee_note, goodput_note=goodput_note
    )
