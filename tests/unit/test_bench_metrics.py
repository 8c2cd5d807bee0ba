"""Metrics math: against real `vllm bench serve` results and against vLLM's own calculate_metrics."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from llmdeck.bench.load import arrival_offsets, vllm_arrival_rng
from llmdeck.bench.metrics import (
    compute_metrics,
    exact_peak_concurrency,
    exact_peak_output_tokens_per_s,
    parse_goodput,
)
from llmdeck.bench.result_schema import RequestRecord
from repo_paths import SHARED

FIX = SHARED / "fixtures" / "vllm-0.22.0-h200"


def rec(
    i: int, start: float, ttft: float, itl: list[float], out: int | None, plen: int = 10
) -> RequestRecord:
    return RequestRecord(
        index=i,
        ok=True,
        arrival=start,
        start=start,
        queue_time=0.0,
        ttft=ttft,
        latency=ttft + sum(itl),
        end=start + ttft + sum(itl) + 0.001,
        itl=itl,
        prompt_len=plen,
        prompt_tokens=plen,
        output_len=out or 0,
        output_tokens=out,
        num_chunks=len(itl) + 1,
    )


def synthetic(n: int = 25, seed: int = 3) -> list[RequestRecord]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.randint(1, 40)
        itl = [rnd.uniform(0.005, 0.05) for _ in range(k - 1)]
        out.append(rec(i, rnd.uniform(0, 5), rnd.uniform(0.02, 0.8), itl, k, plen=rnd.randint(5, 50)))
    return out


@pytest.mark.parametrize(
    "name",
    [
        "vllm-bench-serve-random-512in-256out-20req-1rps.json",
        "hybrid-vllm-bench-serve-prefix-repetition-4096-256-c8.json",
    ],
)
def test_throughputs_match_real_vllm_results(name: str) -> None:
    """Same totals and duration as a real run -> the same throughputs vLLM printed."""
    v = json.loads((FIX / name).read_text())
    n = v["completed"]
    per_in = v["total_input_tokens"] // n
    per_out = v["total_output_tokens"] // n
    records = [rec(i, 0.1 * i, 0.05, [0.01] * (per_out - 1), per_out, plen=per_in) for i in range(n)]
    m = compute_metrics(records, v["duration"])
    assert m.completed == v["completed"] and m.failed == v["failed"]
    assert m.total_input_tokens == v["total_input_tokens"]
    assert m.total_output_tokens == v["total_output_tokens"]
    assert m.request_throughput == pytest.approx(v["request_throughput"], rel=1e-12)
    assert m.output_throughput == pytest.approx(v["output_throughput"], rel=1e-12)
    assert m.total_token_throughput == pytest.approx(v["total_token_throughput"], rel=1e-12)


def test_vllm_reported_peak_concurrency_overcounts() -> None:
    """The fixture ran with --max-concurrency 8 but vLLM printed 15 (its 1-s buckets)."""
    v = json.loads((FIX / "hybrid-vllm-bench-serve-prefix-repetition-4096-256-c8.json").read_text())
    assert v["max_concurrency"] == 8 and v["max_concurrent_requests"] > 8
    # 8 slots, each request 1.4 s, the next one starts as the previous ends (closed loop):
    records = []
    for slot in range(8):
        t = 0.05 * slot
        for j in range(3):
            records.append(rec(slot * 3 + j, t, 0.3, [0.01] * 110, 111))
            t = records[-1].end or 0.0
    m = compute_metrics(records, 5.0)
    assert m.peak_concurrency == 8
    assert m.vllm_compatible_peak_concurrent_requests > 8


def test_matches_vllm_calculate_metrics_exactly() -> None:
    serve = pytest.importorskip("vllm.benchmarks.serve")
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    records = synthetic()
    records.append(RequestRecord(index=99, ok=False, error="x", error_kind="http", prompt_len=5))
    outputs = []
    for r in records:
        o = RequestFuncOutput()
        o.success = r.ok
        if r.ok:
            o.ttft, o.itl, o.latency = r.ttft, list(r.itl), r.latency
            o.start_time, o.output_tokens, o.prompt_len = r.start, r.output_tokens, r.prompt_tokens
        outputs.append(o)
    dur = 7.5
    pct = [50.0, 90.0, 99.0]
    slos = {"ttft": 500.0, "tpot": 30.0}
    vm, _ = serve.calculate_metrics(
        input_requests=[None] * len(outputs),
        outputs=outputs,
        dur_s=dur,
        tokenizer=None,
        selected_percentiles=pct,
        goodput_config_dict=slos,
    )
    m = compute_metrics(records, dur, goodput_slos_ms=slos, percentiles=pct)
    assert (m.completed, m.failed) == (vm.completed, vm.failed)
    assert (m.total_input_tokens, m.total_output_tokens) == (vm.total_input, vm.total_output)
    for ours, theirs in [
        (m.request_throughput, vm.request_throughput),
        (m.output_throughput, vm.output_throughput),
        (m.total_token_throughput, vm.total_token_throughput),
        (m.request_goodput, vm.request_goodput),
    ]:
        assert ours == pytest.approx(theirs, rel=1e-12)
    for name in ("ttft", "tpot", "itl", "e2el"):
        s = getattr(m, f"{name}_ms")
        assert s.mean == pytest.approx(getattr(vm, f"mean_{name}_ms"), rel=1e-9)
        assert s.median == pytest.approx(getattr(vm, f"median_{name}_ms"), rel=1e-9)
        assert s.std == pytest.approx(getattr(vm, f"std_{name}_ms"), rel=1e-9)
        for q, val in getattr(vm, f"percentiles_{name}_ms"):
            assert s.percentiles[f"p{q:g}"] == pytest.approx(val, rel=1e-9)
    assert m.vllm_compatible_peak_output_tokens_per_s == vm.max_output_tokens_per_s
    assert m.vllm_compatible_peak_concurrent_requests == vm.max_concurrent_requests


def test_tpot_definition_and_one_token_requests() -> None:
    records = [rec(0, 0.0, 0.1, [0.02, 0.04], 3), rec(1, 0.0, 0.3, [], 1)]
    m = compute_metrics(records, 1.0, goodput_slos_ms={"tpot": 1.0})
    assert m.tpot_ms is not None and m.tpot_ms.n == 1  # only requests with > 1 token
    assert m.tpot_ms.mean == pytest.approx((0.06 / 2) * 1000)
    assert m.itl_ms is not None and m.itl_ms.n == 2
    # goodput counts the 1-token request (TPOT 0) as good, the other (30 ms > 1 ms) as not
    assert m.request_goodput == pytest.approx(1.0)


def test_percentiles_are_numpy_default_linear() -> None:
    records = [rec(i, 0.0, t, [], 1) for i, t in enumerate([0.1, 0.2, 0.3, 0.4, 1.0])]
    m = compute_metrics(records, 1.0)
    assert m.ttft_ms is not None
    assert m.ttft_ms.percentiles["p99"] == pytest.approx(float(np.percentile([100, 200, 300, 400, 1000], 99)))
    assert m.ttft_ms.percentiles["p90"] == pytest.approx(760.0)


def test_usage_missing_falls_back_to_chunks_and_is_flagged() -> None:
    r = rec(0, 0.0, 0.1, [0.01] * 4, None)
    m = compute_metrics([r], 1.0)
    assert m.total_output_tokens == 5
    assert m.output_tokens_from_chunks == 1


def test_failed_requests_excluded_but_counted() -> None:
    records = [
        *synthetic(5),
        RequestRecord(index=9, ok=False, error="boom", error_kind="dropped", start=0.5, end=0.6),
    ]
    m = compute_metrics(records, 2.0)
    assert m.failed == 1 and m.completed == 5


def test_exact_peak_concurrency_touching_intervals_do_not_overlap() -> None:
    a = rec(0, 0.0, 0.1, [0.1] * 9, 10)  # 0.0 .. 1.001
    b = rec(1, a.end or 0.0, 0.1, [0.1] * 9, 10)
    c = rec(2, 0.5, 0.1, [0.1], 2)
    assert exact_peak_concurrency([a, b]) == 1
    assert exact_peak_concurrency([a, b, c]) == 2


def test_exact_peak_tokens_per_s_uses_sliding_window() -> None:
    # 10 tokens in [0.6, 1.5): a 1-s bucket grid splits them 4/6, the sliding window sees all 10
    r = rec(0, 0.5, 0.1, [0.1] * 9, 10)
    assert exact_peak_output_tokens_per_s([r]) == pytest.approx(10.0)
    m = compute_metrics([r], 2.0)
    assert m.vllm_compatible_peak_output_tokens_per_s < 10
    # bundled chunks: 2 chunks carrying 10 tokens count as 10 tokens
    r2 = rec(1, 0.0, 0.1, [0.1], 10)
    assert exact_peak_output_tokens_per_s([r2]) == pytest.approx(10.0)


def test_queue_time_is_reported_apart_from_ttft() -> None:
    r = rec(0, 1.0, 0.2, [0.01], 2)
    r.arrival, r.queue_time = 0.0, 1.0
    m = compute_metrics([r], 2.0)
    assert m.queue_time_ms is not None and m.queue_time_ms.mean == pytest.approx(1000.0)
    assert m.ttft_ms is not None and m.ttft_ms.mean == pytest.approx(200.0)


def test_gamma_arrivals_like_vllm() -> None:
    rng = np.random.default_rng(1)
    t = arrival_offsets(50, 4.0, 1.0, rng)
    assert len(t) == 50 and t == sorted(t)
    assert t[-1] == pytest.approx(50 / 4.0)  # rescaled like vLLM
    assert arrival_offsets(3, None, 1.0, rng) == [0.0, 0.0, 0.0]
    same = arrival_offsets(20, 2.0, 0.5, np.random.default_rng(7))
    assert same == arrival_offsets(20, 2.0, 0.5, np.random.default_rng(7))


def test_parse_goodput() -> None:
    assert parse_goodput(["ttft:500", "tpot:50ms", "e2el=2000"]) == {
        "ttft": 500.0,
        "tpot": 50.0,
        "e2el": 2000.0,
    }
    with pytest.raises(ValueError):
        parse_goodput(["latency:5"])


def test_arrivals_are_vllm_bench_serves_for_the_same_seed() -> None:
    """vllm bench serve: np.random.seed(seed), then one np.random.gamma(shape=b, scale=1/(rate*b)) per
    request, cumulated and rescaled to n / rate (vllm/benchmarks/serve.py get_request)."""
    n, rate, b, seed = 25, 3.0, 1.0, 11
    np.random.seed(seed)
    delays = list(np.cumsum([np.random.gamma(shape=b, scale=1.0 / (rate * b)) for _ in range(n)]))
    expected = [d * (n / rate) / delays[-1] for d in delays]
    assert arrival_offsets(n, rate, b, vllm_arrival_rng(seed)) == pytest.approx(expected, rel=1e-12)
    assert arrival_offsets(n, rate, b, vllm_arrival_rng(seed + 1)) != pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize(
    ("field", "value"), [("mean_ttft_ms", -5), ("completed", -3), ("duration", float("nan"))]
)
def test_a_vllm_result_with_an_impossible_number_is_refused(
    field: str, value: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report --against` had compared a negative TTFT and -3 completed requests, exit 0."""
    from cli_helpers import run_cli
    from repo_paths import ROOT

    v = json.loads((FIX / "vllm-bench-serve-random-512in-256out-20req-1rps.json").read_text())
    v[field] = value
    bad = tmp_path / "v.json"
    bad.write_text(json.dumps(v))
    ours = next((ROOT / "evidence" / "tune" / "cpu-confirm" / "bench").glob("trial-*.json"))
    code, _out, err = run_cli(["report", str(ours), "--against", str(bad)], capsys)
    assert code == 2 and f"{field} is" in " ".join(err.split()), err
