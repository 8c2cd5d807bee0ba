"""Repeated scenarios (``llmdeck bench --repeat N``): how far the same measurement moves between runs.

One run's mean TTFT is not a property of the server alone. On an H200 serving the seeds' coding model at
1 req/s, two runs of `vllm bench serve` itself on the same 96 prompts and send times differed by 4.3%
and 6.4% (benchmarks/README.md, session 7, the A/A control); TPOT by about 2%, output throughput by
under 0.1%. A difference between two configurations smaller than a metric's run-to-run range is not
shown to be real, so ``--repeat`` runs every scenario N times and reports each metric's median and
range.

Runs go in rounds (A1 B1 C1, A2 B2 C2, ...): a server that drifts during the benchmark moves every
scenario's runs alike instead of the last scenario's only. Every run gets prompts of its own (a fresh
seed): repeating the same prompts would turn runs 2..N into prefix-cache hits on a server with prefix
caching on (vLLM's default), and measure the cache instead of the server.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from llmdeck.bench.result_schema import (
    BenchResult,
    RepeatSummary,
    ScenarioMetrics,
    ScenarioResult,
    ScenarioSpec,
    Spread,
)


def expand_repeats(specs: list[ScenarioSpec], repeat: int) -> list[ScenarioSpec]:
    """Each scenario ``repeat`` times, in rounds, named ``NAME#R`` with a seed of its own.

    The seeds of ``specs`` are distinct and lie within ``len(specs)`` of each other (as `llmdeck
    bench` assigns them), so ``seed + r * len(specs)`` keeps every run's seed distinct."""
    if repeat <= 1:
        return specs
    n = len(specs)
    return [
        spec.model_copy(
            update={
                "name": f"{spec.name}#{r + 1}",
                "seed": spec.seed + r * n,
                "repeat": r + 1,
                "repeat_of": spec.name,
            }
        )
        for r in range(repeat)
        for spec in specs
    ]


def _mean_ttft(m: ScenarioMetrics, _sr: ScenarioResult) -> float | None:
    return m.ttft_ms.mean if m.ttft_ms else None


def _p99_ttft(m: ScenarioMetrics, _sr: ScenarioResult) -> float | None:
    return m.ttft_ms.p(99) if m.ttft_ms else None


def _mean_tpot(m: ScenarioMetrics, _sr: ScenarioResult) -> float | None:
    return m.tpot_ms.mean if m.tpot_ms else None


def _mean_itl(m: ScenarioMetrics, _sr: ScenarioResult) -> float | None:
    return m.itl_ms.mean if m.itl_ms else None


def _output_tps(m: ScenarioMetrics, _sr: ScenarioResult) -> float | None:
    return m.output_throughput


def _server_ttft(_m: ScenarioMetrics, sr: ScenarioResult) -> float | None:
    return sr.server_metrics.server_mean_ttft_ms if sr.server_metrics else None


METRICS: dict[str, Callable[[ScenarioMetrics, ScenarioResult], float | None]] = {
    "mean_ttft_ms": _mean_ttft,
    "p99_ttft_ms": _p99_ttft,
    "mean_tpot_ms": _mean_tpot,
    "mean_itl_ms": _mean_itl,
    "output_throughput": _output_tps,
    "server_mean_ttft_ms": _server_ttft,
}


def spread(values: list[float]) -> Spread:
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return Spread(median=med, min=lo, max=hi, range_pct=(hi - lo) / med * 100 if med else 0.0)


def summarize_repeats(result: BenchResult) -> list[RepeatSummary]:
    """Per repeated scenario, in first-run order: each metric's median and range over the runs that
    finished (``done``); a run that failed, was interrupted or skipped is counted as planned only."""
    groups: dict[str, list[ScenarioResult]] = {}
    for sr in result.scenarios:
        if sr.spec.repeat_of is not None:
            groups.setdefault(sr.spec.repeat_of, []).append(sr)
    out: list[RepeatSummary] = []
    for name, runs in groups.items():
        done = [sr for sr in runs if sr.status == "done" and sr.metrics is not None]
        label = runs[0].spec.model_copy(update={"repeat": None}).label()
        summary = RepeatSummary(scenario=name, label=label, runs_planned=len(runs), runs_measured=len(done))
        for key, get in METRICS.items():
            values = [v for sr in done if sr.metrics is not None and (v := get(sr.metrics, sr)) is not None]
            if values:
                summary.metrics[key] = spread(values)
        out.append(summary)
    return out
