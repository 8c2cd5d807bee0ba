"""Benchmark metrics, computed as ``vllm bench serve`` computes them (vllm/benchmarks/serve.py,
``calculate_metrics``), plus exact peaks and the client queue time.

* output tokens: ``usage.completion_tokens``; when missing, the chunk count (counted in
  ``output_tokens_from_chunks``).
* TPOT per request = (E2EL - TTFT) / (output_tokens - 1), only when output_tokens > 1.
* ITL pooled over all requests; throughputs = totals / duration.
* percentiles: ``numpy.percentile`` default (linear); std: ``numpy.std`` (population).
* goodput: a request is good when every given SLO (ms) >= its value (TPOT of 1-token requests = 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from llmdeck.bench.result_schema import RequestRecord, ScenarioMetrics, Stats

DEFAULT_PERCENTILES: tuple[float, ...] = (50, 90, 95, 99)


def stats_ms(values_s: Sequence[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> Stats | None:
    """Mean/median/std/percentiles in ms of values given in seconds; None when empty."""
    if not values_s:
        return None
    arr = np.asarray(values_s, dtype=np.float64) * 1000.0
    pct: list[float] = [float(x) for x in np.percentile(arr, list(percentiles))] if percentiles else []
    return Stats(
        n=int(arr.size),
        mean=float(np.mean(arr)),
        median=float(np.median(arr)),
        std=float(np.std(arr)),
        percentiles={f"p{q:g}": float(v) for q, v in zip(percentiles, pct, strict=True)},
    )


def output_tokens_of(rec: RequestRecord) -> tuple[int, bool]:
    """(output tokens, from_usage) of a successful request."""
    if rec.output_tokens:
        return rec.output_tokens, True
    return rec.num_chunks, False


def chunk_times(rec: RequestRecord) -> list[float]:
    """Arrival times of the output chunks, rebuilt from start + ttft + cumulative ITL (like vLLM)."""
    if rec.start is None or rec.ttft is None:
        return []
    t = rec.start + rec.ttft
    out = [t]
    for gap in rec.itl:
        t += gap
        out.append(t)
    return out


def exact_peak_concurrency(records: Sequence[RequestRecord]) -> int:
    """Most requests in flight at one instant (a request is in flight from start to end)."""
    events: list[tuple[float, int]] = []
    for r in records:
        if r.start is None:
            continue
        end = r.end if r.end is not None else (r.start + (r.latency or 0.0))
        events.append((r.start, 1))
        events.append((end, -1))
    events.sort(key=lambda e: (e[0], e[1]))  # ends (-1) before starts at the same instant
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def exact_peak_output_tokens_per_s(records: Sequence[RequestRecord], window_s: float = 1.0) -> float:
    """Most output tokens in any window of ``window_s`` seconds (sliding, not bucketed).

    Each chunk weighs ``output_tokens / num_chunks`` tokens, so bundled chunks count right.
    """
    pts: list[tuple[float, float]] = []
    for r in records:
        if not r.ok:
            continue
        times = chunk_times(r)
        if not times:
            continue
        toks, _ = output_tokens_of(r)
        w = toks / len(times)
        pts.extend((t, w) for t in times)
    if not pts:
        return 0.0
    pts.sort()
    best = cur = 0.0
    lo = 0
    for t, w in pts:
        cur += w
        while pts[lo][0] <= t - window_s:
            cur -= pts[lo][1]
            lo += 1
        best = max(best, cur)
    return best / window_s


def vllm_compatible_peaks(records: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's own peak values (1-s buckets from the first start; known to over-count concurrency)."""
    ok = [r for r in records if r.ok and r.start is not None and r.latency is not None]
    if not ok:
        return 0.0, 0
    min_start = min(r.start for r in ok if r.start is not None)
    max_end = max((r.start or 0.0) + (r.latency or 0.0) for r in ok)
    n = math.ceil(max_end - min_start) + 1
    tokens = np.zeros(n)
    conc = np.zeros(n)
    for r in ok:
        for t in chunk_times(r):
            b = int(t - min_start)
            if 0 <= b < n:
                tokens[b] += 1
        s = int((r.start or 0.0) - min_start)
        e = int((r.start or 0.0) + (r.latency or 0.0) - min_start)
        for sec in range(s, e + 1):
            conc[sec] += 1
    return float(np.max(tokens)), int(np.max(conc))


@dataclass
class _Tally:
    """The per-request series and counters of one scenario, gathered in one pass."""

    ttfts: list[float] = field(default_factory=list)
    tpots: list[float] = field(default_factory=list)
    all_tpots: list[float] = field(default_factory=list)  # 0.0 for one-token answers (goodput)
    itls: list[float] = field(default_factory=list)
    e2els: list[float] = field(default_factory=list)
    queues: list[float] = field(default_factory=list)
    total_in: int = 0
    total_out: int = 0
    completed: int = 0
    failed: int = 0
    from_chunks: int = 0
    mismatches: int = 0

    def add(self, r: RequestRecord) -> None:
        if not r.ok:
            if r.error_kind != "not_run":  # never sent (a stopped run, an earlier turn failed): no failure
                self.failed += 1
            return
        out, from_usage = output_tokens_of(r)
        if not from_usage:
            self.from_chunks += 1
        self.total_out += out
        self.total_in += r.prompt_tokens if r.prompt_tokens is not None else r.prompt_len
        if r.prompt_tokens is not None and r.prompt_len and r.prompt_tokens != r.prompt_len:
            self.mismatches += 1
        ttft = r.ttft or 0.0
        lat = r.latency or 0.0
        tpot = 0.0
        if out > 1:
            tpot = (lat - ttft) / (out - 1)
            self.tpots.append(tpot)
        self.all_tpots.append(tpot)
        self.itls.extend(r.itl)
        self.ttfts.append(ttft)
        self.e2els.append(lat)
        if r.queue_time is not None:
            self.queues.append(r.queue_time)
        self.completed += 1


def _good_requests(t: _Tally, slos: dict[str, float]) -> int:
    """Completed requests within every SLO (``ttft``/``tpot``/``e2el`` in ms)."""
    series = {"ttft": t.ttfts, "tpot": t.all_tpots, "e2el": t.e2els}
    cols = [(series[k], v / 1000.0) for k, v in slos.items() if k in series]
    return sum(1 for i in range(t.completed) if all(lim >= vals[i] for vals, lim in cols))


def compute_metrics(
    records: Sequence[RequestRecord],
    duration_s: float,
    *,
    goodput_slos_ms: dict[str, float] | None = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> ScenarioMetrics:
    """All metrics of one scenario from its request records (warmup already excluded)."""
    t = _Tally()
    for r in records:
        t.add(r)
    dur = duration_s if duration_s > 0 else float("nan")
    slos = dict(goodput_slos_ms or {})
    goodput = _good_requests(t, slos) / dur if slos else None
    peak_tok, peak_conc = vllm_compatible_peaks(records)
    return ScenarioMetrics(
        completed=t.completed,
        failed=t.failed,
        duration_s=duration_s,
        total_input_tokens=t.total_in,
        total_output_tokens=t.total_out,
        request_throughput=t.completed / dur,
        output_throughput=t.total_out / dur,
        total_token_throughput=(t.total_in + t.total_out) / dur,
        request_goodput=goodput,
        goodput_slos_ms=slos,
        ttft_ms=stats_ms(t.ttfts, percentiles),
        tpot_ms=stats_ms(t.tpots, percentiles),
        itl_ms=stats_ms(t.itls, percentiles),
        e2el_ms=stats_ms(t.e2els, percentiles),
        queue_time_ms=stats_ms(t.queues, percentiles),
        peak_concurrency=exact_peak_concurrency(records),
        peak_output_tokens_per_s=exact_peak_output_tokens_per_s(records),
        vllm_compatible_peak_concurrent_requests=peak_conc,
        vllm_compatible_peak_output_tokens_per_s=peak_tok,
        output_tokens_from_chunks=t.from_chunks,
        prompt_len_mismatches=t.mismatches,
    )


def parse_goodput(pairs: Sequence[str]) -> dict[str, float]:
    """``["ttft:500", "tpot:50"]`` (vLLM's --goodput KEY:VALUE, ms) -> dict. Raises ValueError."""
    out: dict[str, float] = {}
    for pair in pairs:
        for item in pair.replace(",", " ").split():
            key, sep, val = item.partition(":")
            if not sep:
                key, sep, val = item.partition("=")
            key = key.strip().lower()
            if key not in {"ttft", "tpot", "e2el"} or not sep:
                raise ValueError(f"bad goodput SLO {item!r}: use ttft:MS, tpot:MS or e2el:MS")
            ms = float(val.strip().removesuffix("ms"))
            if ms < 0:
                raise ValueError(f"goodput SLO {item!r} must not be negative")
            out[key] = ms
    return out
