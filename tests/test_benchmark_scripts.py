"""The benchmark scripts' own arithmetic, on committed results (benchmarks/results)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from server_referenced import referenced  # noqa: E402


def _load(name: str) -> dict:
    return json.loads((BENCH / "results" / name).read_text())


def test_server_referenced_divides_each_run_by_its_own_server_figures() -> None:
    rep = _load("agreement_h200-c16-v7.json")
    ref = referenced(rep)
    assert ref is not None
    runs = rep["runs"]
    want = {t: statistics.median(r["mean_ttft_ms"] / r["server_mean_ttft_ms"] for r in runs[t]) for t in runs}
    assert ref["per_tool"]["mean_ttft_ms"] == pytest.approx(want)
    assert ref["ratios_llmdeck_over_vllm"]["mean_ttft_ms"] == pytest.approx(want["llmdeck"] / want["vllm"])
    # the raw medians of this series disagree by 8% on TTFT; referenced to the server they agree within 1%
    assert abs(rep["ratios_llmdeck_over_vllm"]["mean_ttft_ms"] - 1) > 0.05
    for k, v in ref["ratios_llmdeck_over_vllm"].items():
        assert abs(v - 1) < 0.015, k


def test_server_referenced_refuses_runs_it_cannot_reference() -> None:
    # side by side: the server's counters mix both tools' requests
    assert referenced(_load("agreement_cpu-c1-side-by-side.json")) is None
    # older results carry no server figures
    assert referenced(_load("agreement_h200-1rps-v5.json")) is None


def test_blocks_union_is_the_mean_over_all_requests() -> None:
    from agreement_cpu import _union

    def block(ttfts: list[float], itl: float, tokens_each: int, duration: float) -> dict:
        n = len(ttfts)
        return {
            "tool": "llmdeck",
            "completed": n,
            "failed": 0,
            "mean_ttft_ms": sum(ttfts) / n,
            "mean_tpot_ms": itl,
            "mean_itl_ms": itl,
            "chunks": n * tokens_each,
            "total_output_tokens": n * tokens_each,
            "duration_s": duration,
        }

    run = _union([block([10.0, 20.0], 2.0, 5, 3.0), block([40.0], 5.0, 5, 1.0)])
    assert run["completed"] == 3
    assert run["mean_ttft_ms"] == pytest.approx((10 + 20 + 40) / 3)  # over requests, not over blocks
    assert run["mean_tpot_ms"] == pytest.approx((2 + 2 + 5) / 3)
    assert run["mean_itl_ms"] == pytest.approx((8 * 2.0 + 4 * 5.0) / 12)  # over the 12 gaps
    assert run["output_throughput"] == pytest.approx(15 / 4.0)
    assert len(run["blocks"]) == 2
