"""Per-request series for the charts, downsampled so that a page of thousands of requests stays small:
CDFs as a few hundred quantiles, time series in at most a few hundred bins."""

from __future__ import annotations

import itertools

import numpy as np
from pydantic import BaseModel, Field

from llmdeck.bench.metrics import chunk_times, output_tokens_of
from llmdeck.bench.result_schema import RequestRecord

CDF_POINTS = 300
MAX_SCATTER = 400
MAX_BINS = 300


class Cdf(BaseModel):
    """An empirical CDF in ms: ``x[i]`` is the ``y[i]`` quantile (exact when n <= CDF_POINTS)."""

    n: int
    x: list[float] = Field(default_factory=list)
    y: list[float] = Field(default_factory=list)


class Series(BaseModel):
    """x/y pairs; ``binned`` when the points are per-bin aggregates of more samples."""

    x: list[float] = Field(default_factory=list)
    y: list[float] = Field(default_factory=list)
    binned: bool = False
    note: str = ""


def cdf(values_ms: list[float], points: int = CDF_POINTS) -> Cdf:
    arr = np.sort(np.asarray(values_ms, dtype=np.float64))
    n = int(arr.size)
    if n == 0:
        return Cdf(n=0)
    if n <= points:
        return Cdf(n=n, x=arr.tolist(), y=(np.arange(1, n + 1) / n).tolist())
    q = np.linspace(0.0, 1.0, points)
    return Cdf(n=n, x=np.quantile(arr, q).tolist(), y=q.tolist())


def per_request_ms(records: list[RequestRecord]) -> dict[str, list[float]]:
    """TTFT, TPOT, ITL and E2EL in ms of the successful requests, defined as in ``metrics.py``
    (TPOT only for requests of more than one output token; ITL pooled)."""
    out: dict[str, list[float]] = {"ttft": [], "tpot": [], "itl": [], "e2el": []}
    for r in records:
        if not r.ok:
            continue
        toks, _ = output_tokens_of(r)
        ttft, lat = r.ttft or 0.0, r.latency or 0.0
        out["ttft"].append(ttft * 1000.0)
        out["e2el"].append(lat * 1000.0)
        if toks > 1:
            out["tpot"].append((lat - ttft) / (toks - 1) * 1000.0)
        out["itl"].extend(g * 1000.0 for g in r.itl)
    return out


def ttft_over_time(records: list[RequestRecord]) -> Series:
    """TTFT (ms) by request start (s): every request, or per-bin medians beyond MAX_SCATTER."""
    pts = sorted(
        (r.start, r.ttft * 1000.0) for r in records if r.ok and r.start is not None and r.ttft is not None
    )
    if len(pts) <= MAX_SCATTER:
        return Series(x=[p[0] for p in pts], y=[p[1] for p in pts])
    t = np.asarray([p[0] for p in pts])
    v = np.asarray([p[1] for p in pts])
    edges = np.linspace(t[0], t[-1], MAX_BINS + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, MAX_BINS - 1)
    xs: list[float] = []
    ys: list[float] = []
    for b in range(MAX_BINS):
        sel = v[idx == b]
        if sel.size:
            xs.append(float((edges[b] + edges[b + 1]) / 2))
            ys.append(float(np.median(sel)))
    return Series(x=xs, y=ys, binned=True, note=f"median per {edges[1] - edges[0]:.2g}-s bin of {len(pts)}")


def tokens_per_s(records: list[RequestRecord]) -> Series:
    """Output tokens per second over the run: chunk arrival times (each chunk weighing
    output_tokens / chunks, as the exact peak does) in 1-s bins, wider when the run is long."""
    times: list[float] = []
    weights: list[float] = []
    for r in records:
        if not r.ok:
            continue
        ts = chunk_times(r)
        if ts:
            toks, _ = output_tokens_of(r)
            times.extend(ts)
            weights.extend([toks / len(ts)] * len(ts))
    if not times:
        return Series()
    t = np.asarray(times)
    lo, hi = float(np.floor(t.min())), float(np.ceil(t.max()))
    width = max(1.0, float(np.ceil((hi - lo) / MAX_BINS)))
    nb = max(1, int(np.ceil((hi - lo) / width)))
    sums, edges = np.histogram(t, bins=nb, range=(lo, lo + nb * width), weights=np.asarray(weights))
    note = f"{width:g}-s bins" if width > 1 else "1-s bins"
    return Series(x=(edges[:-1] + width / 2).tolist(), y=(sums / width).tolist(), binned=True, note=note)


def thin(
    t: list[float], v: list[float | None], keep: str = "max", limit: int = MAX_BINS
) -> tuple[list[float], list[float]]:
    """A sampled series cut to at most ``limit`` points: per bin of consecutive samples its max (a
    queue's spike stays visible) or min (``keep="min"``: MemAvailable's dip stays); None = gap (NaN).
    A column with no values (not reported: the result's Timeline allows it) draws nothing."""
    if not v:
        return [], []
    vals = np.asarray([np.nan if x is None else x for x in v], dtype=np.float64)
    times = np.asarray(t, dtype=np.float64)
    if times.size <= limit:
        return times.tolist(), vals.tolist()
    edges = np.linspace(0, times.size, limit + 1).astype(int)
    xs, ys = [], []
    for lo, hi in itertools.pairwise(edges.tolist()):
        chunk = vals[lo:hi]
        xs.append(float(times[lo]))
        if np.all(np.isnan(chunk)):
            ys.append(float("nan"))
        else:
            ys.append(float(np.nanmax(chunk) if keep == "max" else np.nanmin(chunk)))
    return xs, ys
