"""``--find-max-rate``: per trial, the highest request rate the config serves within the SLOs.

Instead of one bench at the workload's fixed concurrency, the trial's server (one start) gets a
sequence of bench runs at set arrival rates (open loop, as ``vllm bench serve --request-rate``, no
concurrency cap: a cap would queue the overload in the client, where no latency counts it). The rates:

1. geometric steps from ``--rate-start``, ``factor`` (2) apart: up while a rate meets the SLOs, down
   while the first ones miss, until one rate passes and one fails (the bracket);
2. then a bisection of the bracket at its geometric midpoint, until the bracket is within
   ``resolution`` (10%) — at most ``--rate-steps`` bench runs in all.

A rate *passes* when every stated SLO statistic is within its limit and no request failed (the same
test as a fixed-load trial's). The trial's score is the goodput (requests/s within the per-request
SLOs) measured at the highest rate that passed — the requests/s this config serves within the SLOs;
``max_rate`` records that rate itself (sessions/s for the session workloads, where each session is
``--num-turns`` requests). No rate passing: the lowest rate's numbers, and the trial misses the SLOs.
Each step is one run of bench's runner (``bench/trial-NNN-rK.json``) with prompts of its own (seed
offset by the step, as bench's own sweeps do: no step reuses another's prefix cache); every trial gets
the same sequence of seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeck.tune.schema import RateStep, RateSweep, TrialMetrics, TuneEvent, TuneEvents, TuneRequest

if TYPE_CHECKING:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord
    from llmdeck.settings import Settings


def bracket(steps: list[RateStep]) -> tuple[float | None, float | None]:
    """(the highest rate that passed, the lowest failed rate above it); None where there is none."""
    passed = [s.rate for s in steps if s.meets_slo]
    lo = max(passed) if passed else None
    failed = [s.rate for s in steps if not s.meets_slo and (lo is None or s.rate > lo)]
    return lo, (min(failed) if failed else None)


def next_rate(steps: list[RateStep], sweep: RateSweep) -> float | None:
    """The next rate to measure, or None when the sweep is done (bracket narrow enough, or out of steps)."""
    if len(steps) >= sweep.max_steps:
        return None
    if not steps:
        return sweep.start
    lo, hi = bracket(steps)
    if lo is not None and hi is not None:
        return None if hi <= lo * (1 + sweep.resolution) else math.sqrt(lo * hi)
    if lo is not None:
        return lo * sweep.factor
    assert hi is not None
    return hi / sweep.factor


def find_max_rate(
    measure: Callable[[float, int], RateStep],
    sweep: RateSweep,
    stop: Callable[[], bool] = lambda: False,
) -> list[RateStep]:
    """Every step of the sweep, in order; ``measure(rate, step_index)`` runs one; ``stop()`` true ends
    it early (a bench that did not complete: the server is gone or broke)."""
    steps: list[RateStep] = []
    while not stop() and (rate := next_rate(steps, sweep)) is not None:
        steps.append(measure(rate, len(steps)))
    return steps


def best_step(steps: list[RateStep]) -> RateStep | None:
    """The highest rate that passed."""
    passed = [s for s in steps if s.meets_slo]
    return max(passed, key=lambda s: s.rate) if passed else None


def sweep_trial(
    req: TuneRequest,
    server: ServerRecord,
    spec: LaunchSpec,
    number: int,
    out_dir: Path,
    settings: Settings,
    events: TuneEvents,
) -> tuple[TrialMetrics, Path | None, str | None]:
    """The trial's rate sweep on its running server: (the metrics at the highest passing rate, or at
    the lowest when none passed, with every step; that step's bench file; an error or None)."""
    from llmdeck.tune.trial import bench, meets, score, tokenizer_of
    from llmdeck.tune.workload import bench_request

    assert req.load.rate_sweep is not None
    kept: dict[float, TrialMetrics] = {}
    error: list[str] = []

    def measure(rate: float, k: int) -> RateStep:
        out = out_dir / "bench" / f"trial-{number:03d}-r{k + 1}.json"
        breq = bench_request(req, server.base_url, tokenizer_of(spec), seed=k).model_copy(
            update={"request_rates": [rate], "max_concurrencies": [None], "repeat": 1}
        )
        events(TuneEvent(kind="bench", message=f"bench: {req.workload} at {rate:.3g} req/s (step {k + 1})"))
        result = bench(breq, server, spec, out, settings, req)
        m = kept[rate] = score(result, req)
        ok = result.status == "complete" and meets(m, req)
        if result.status != "complete":
            error.append(result.error or f"the bench at {rate:.3g} req/s ended {result.status}")
        rel = str(out.relative_to(out_dir))
        return RateStep(
            rate=rate, goodput=m.goodput, meets_slo=ok, slo_values_ms=m.slo_values_ms, bench_file=rel
        )

    steps = find_max_rate(measure, req.load.rate_sweep, stop=lambda: bool(error))
    top = best_step(steps) or min(steps, key=lambda s: s.rate)
    metrics = kept[top.rate].model_copy(
        update={"max_rate": top.rate if top.meets_slo else None, "rate_steps": steps}
    )
    _say(steps, top, events)
    return metrics, out_dir / top.bench_file if top.bench_file else None, error[0] if error else None


def _say(steps: list[RateStep], top: RateStep, events: TuneEvents) -> None:
    seq = ", ".join(f"{s.rate:.3g}{' pass' if s.meets_slo else ' miss'}" for s in steps)
    what = f"highest rate within the SLOs {top.rate:.3g} req/s" if top.meets_slo else "no rate met the SLOs"
    events(TuneEvent(kind="bench", message=f"rate sweep: {seq} — {what}"))
