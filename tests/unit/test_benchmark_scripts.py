"""The benchmark scripts' own arithmetic, on committed results (benchmarks/results)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from repo_paths import ROOT

BENCH = ROOT / "benchmarks"
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


@pytest.mark.parametrize(
    ("name", "blocks_per_run"),
    [("agreement_h200-c16-v9.json", 3), ("agreement_h200-1rps-v12.json", 5)],
)
def test_block_runs_are_vllms_means_over_all_their_requests(name: str, blocks_per_run: int) -> None:
    # v9 (H200, 16 concurrent), v12 (1 req/s, 160 requests a run): each run is the union of its
    # interleaved blocks; its mean TTFT must be the mean over every request of those blocks, as
    # `vllm bench serve` would compute it in one run, and the committed verdict must follow from them
    from agreement_cpu import _runs_from_pairs

    rep = _load(name)
    assert rep["workload"]["blocks_per_run"] == blocks_per_run
    pairs = rep["block_pairs"]
    blocks = rep["workload"]["blocks_per_run"]
    assert len(pairs) == rep["runs_planned"] * blocks
    for pr in pairs:
        for tool in ("vllm", "llmdeck"):
            b = pr[tool]
            assert len(b["ttfts_ms"]) == b["completed"]
            assert statistics.fmean(b["ttfts_ms"]) == pytest.approx(b["mean_ttft_ms"], abs=1e-3)
    runs = _runs_from_pairs(pairs, blocks, 0)
    for tool in ("vllm", "llmdeck"):
        for i, run in enumerate(runs[tool]):
            every = [t for pr in pairs[i * blocks : (i + 1) * blocks] for t in pr[tool]["ttfts_ms"]]
            assert run["mean_ttft_ms"] == pytest.approx(statistics.fmean(every), abs=1e-3)
            assert run["mean_ttft_ms"] == pytest.approx(rep["runs"][tool][i]["mean_ttft_ms"])
            assert run["same_token_totals_as_peer"]
    med = {t: statistics.median(r["mean_ttft_ms"] for r in runs[t]) for t in runs}
    assert rep["ratios_llmdeck_over_vllm"]["mean_ttft_ms"] == pytest.approx(med["llmdeck"] / med["vllm"])
    for metric in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput"):
        med = {t: statistics.median(r[metric] for r in runs[t]) for t in runs}
        assert abs(med["llmdeck"] / med["vllm"] - 1) <= 0.03, metric
    assert rep["within_tolerance"]  # the committed H200 results at both loads: within 3% on all four


def test_paired_requests_difference_is_the_difference_of_block_means() -> None:
    from paired_requests import _longest_run, analyse

    rep = _load("agreement_h200-1rps-v9.json")
    res = analyse(rep)
    assert len(res["pairs"]) == len(rep["block_pairs"]) > 0
    for view, pr in zip(res["pairs"], rep["block_pairs"], strict=True):
        want = pr["vllm"]["mean_ttft_ms"] - pr["llmdeck"]["mean_ttft_ms"]
        assert view["mean_d_ms"] == pytest.approx(want, abs=1e-3)
    # what the clients themselves differ by is small next to what the server moved (< 2 ms here)
    assert 0 < res["client_d_ms"]["median"] < 2
    assert _longest_run([30, 40, -30, 50, 60, 70, 0, 26], 25) == 3
    assert _longest_run([1, 2, 3], 25) == 0


def test_client_part_is_nil_when_one_client_sits_in_both_slots() -> None:
    """The A/A control of v11 (both slots `vllm bench serve`, same prompts and send times as the A/B)
    checks the decomposition on real data: with one client there is nothing for the client part to
    find, while the A/B of the same session finds vLLM's client adding ~1 ms more than llmdeck's."""
    from paired_requests import analyse

    aa, ab = _load("agreement_h200-1rps-aa-v11.json"), _load("agreement_h200-1rps-v11.json")
    assert aa["control"] == "vllm" and ab["control"] is None
    assert aa["workload"]["seeds"] == ab["workload"]["seeds"] and aa["workload"]["temperature"] == 0
    res_aa, res_ab = analyse(aa), analyse(ab)
    assert abs(res_aa["client_d_ms"]["median"]) < 0.3
    assert 0.3 < res_ab["client_d_ms"]["median"] < 2
    # ... while the server alone moved a block's mean TTFT by more than 10 ms in both
    for res in (res_aa, res_ab):
        assert max(abs(p["server_d_ms"]) for p in res["pairs"]) > 10


def test_pooled_requests_are_one_sample_per_tool_over_all_files() -> None:
    from paired_requests import pooled

    reps = [_load("agreement_h200-1rps-v9.json"), _load("agreement_h200-1rps-v10.json")]
    po = pooled(reps)
    assert po is not None
    tv = [t for r in reps for pr in r["block_pairs"] for t in pr["vllm"]["ttfts_ms"]]
    tl = [t for r in reps for pr in r["block_pairs"] for t in pr["llmdeck"]["ttfts_ms"]]
    assert po["requests"] == len(tv) == len(tl) == 16 * 32
    assert po["ratio"] == pytest.approx(statistics.fmean(tl) / statistics.fmean(tv))
    slower = sum(
        pr["llmdeck"]["server_mean_ttft_ms"] > pr["vllm"]["server_mean_ttft_ms"]
        for r in reps
        for pr in r["block_pairs"]
    )
    assert po["pairs_server_slower_for_llmdeck"] == slower and po["pairs_with_server_figures"] == 16
    assert pooled([{"block_pairs": []}]) is None


def _block_report(tool: str, n: int, ttft: float) -> dict:
    """What one tool's measurement of one block reports (the fields the block logic reads)."""
    return {
        "tool": tool,
        "completed": n,
        "failed": 0,
        "mean_ttft_ms": ttft,
        "mean_tpot_ms": 10.0,
        "mean_itl_ms": 10.0,
        "output_throughput": 100.0,
        "duration_s": 1.0,
        "total_input_tokens": 10 * n,
        "total_output_tokens": 100,
        "chunks": 100 + n,
        "ttfts_ms": [ttft] * n,
    }


def test_block_pairs_resume_after_stop_after_as_if_never_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--stop-after ends an invocation between block pairs; --resume continues from the saved file
    with the same seeds and order, so the result equals one uninterrupted invocation."""
    import time

    import agreement_cpu

    def fake_measure(tool: str, b: object, workers: object) -> dict:
        time.sleep(0.15)
        seed = b.seed  # type: ignore[attr-defined]
        n = b.num_prompts  # type: ignore[attr-defined]
        ttft = 50.0 + seed % 7 + (1.0 if tool == "vllm" else 0.0)
        return _block_report(tool, n, ttft) | {
            "seed": seed,
            "prefix_cache_hits": 0.0,
            "server_mean_ttft_ms": ttft - 5,
            "server_mean_itl_ms": 10.0,
            "server_counters": {
                "ttft_sum": (ttft - 5) * n / 1000,
                "ttft_count": n,
                "itl_sum": 1.0,
                "itl_count": 100,
            },
        }

    monkeypatch.setattr(agreement_cpu, "_measure", fake_measure)
    argv = ["--num-prompts", "4", "--blocks", "2", "--runs", "2"]
    out = tmp_path / "a.json"
    first = agreement_cpu.build_parser().parse_args([*argv, "--out", str(out), "--stop-after", "0.5"])
    rep1 = agreement_cpu._run_blocks(first, out, 0)
    assert 1 <= len(rep1["block_pairs"]) < 4 and rep1["runs_done"] < 2
    assert json.loads(out.read_text())["block_pairs"] == rep1["block_pairs"]  # saved after each pair
    again = agreement_cpu.build_parser().parse_args([*argv, "--out", str(out), "--resume"])
    rep2 = agreement_cpu._run_blocks(again, out, 0)
    whole = agreement_cpu.build_parser().parse_args([*argv, "--out", str(tmp_path / "b.json")])
    rep3 = agreement_cpu._run_blocks(whole, tmp_path / "b.json", 0)

    def strip(rep: dict) -> list:
        return [(p["index"], p["seed"], p["order"], p["vllm"]["mean_ttft_ms"]) for p in rep["block_pairs"]]

    assert strip(rep2) == strip(rep3) and len(rep2["block_pairs"]) == 4
    assert rep2["runs_done"] == 2 and rep2["ratios_llmdeck_over_vllm"] == rep3["ratios_llmdeck_over_vllm"]
    # a resume against another workload is refused rather than mixed in
    other = agreement_cpu.build_parser().parse_args(
        ["--num-prompts", "6", "--blocks", "2", "--out", str(out), "--resume"]
    )
    with pytest.raises(SystemExit, match="another workload"):
        agreement_cpu._run_blocks(other, out, 0)


def test_control_runs_one_tool_in_both_slots_and_is_not_resumed_as_a_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--control vllm (an A/A run): the llmdeck slot runs `vllm bench serve` too, the result says so,
    and a saved A/A file is not continued as an A/B comparison (or the reverse)."""
    import agreement_cpu

    called: list[tuple[str, int]] = []

    def fake_child(tool: str, b: object, **_: object) -> dict:
        called.append((tool, b.seed))  # type: ignore[attr-defined]
        return _block_report(tool, b.num_prompts, 50.0)  # type: ignore[attr-defined]

    monkeypatch.setattr(agreement_cpu, "run_child", fake_child)
    monkeypatch.setattr(agreement_cpu, "server_counters", lambda url: None)
    out = tmp_path / "aa.json"
    argv = ["--num-prompts", "4", "--blocks", "2", "--runs", "1", "--out", str(out)]
    a = agreement_cpu.build_parser().parse_args([*argv, "--control", "vllm"])
    rep = agreement_cpu._run_blocks(a, out, 0)
    assert [t for t, _ in called] == ["vllm"] * 4  # both slots of both block pairs
    assert called[0][1] == called[1][1] != called[2][1]  # same prompts within a pair, new ones per pair
    assert rep["control"] == "vllm" and rep["runs_done"] == 1
    agreement_cpu._save(out, rep)
    ab = agreement_cpu.build_parser().parse_args([*argv, "--resume"])
    with pytest.raises(SystemExit, match="--control vllm"):
        agreement_cpu._run_blocks(ab, out, 0)


def test_llmdeck_worker_runs_many_measurements_in_one_process(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The long-lived worker against FakePacedServer (a fake with exact timing, not an engine)."""
    import argparse
    import socket
    import subprocess
    import time

    from _harness import Worker, add_workload_args

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fake = subprocess.Popen(
        [
            sys.executable,
            str(BENCH / "fake_paced_server.py"),
            "--port",
            str(port),
            "--ttft-ms",
            "40",
            "--itl-ms",
            "5",
        ]
    )
    try:
        time.sleep(1.0)
        p = argparse.ArgumentParser()
        add_workload_args(p)
        a = p.parse_args(
            [
                "--base-url",
                f"http://127.0.0.1:{port}",
                "--tokenizer",
                str(tiny_model_dir),
                "--model",
                "fake-paced",
                "--num-prompts",
                "3",
                "--input-len",
                "16",
                "--output-len",
                "4",
                "--max-concurrency",
                "1",
                "--no-metrics",
            ]
        )
        w = Worker("llmdeck", log=tmp_path / "w.log")
        try:
            reps = [w.run(a), w.run(a)]
            pid = w.proc.pid
            assert w.proc.poll() is None  # still the same process, waiting for the next job
        finally:
            w.close()
        for rep in reps:
            assert rep["completed"] == 3 and rep["failed"] == 0
            assert rep["tool"] == "llmdeck (no /metrics sampling)"  # --no-metrics reaches the worker
            assert len(rep["ttfts_ms"]) == 3 and all(t >= 40 for t in rep["ttfts_ms"])
            assert rep["mean_ttft_ms"] == pytest.approx(statistics.fmean(rep["ttfts_ms"]), abs=1e-3)
        assert pid > 0 and w.proc.returncode == 0
    finally:
        fake.terminate()
        fake.wait(10)


def test_pin_parses_core_lists_and_restores_the_affinity() -> None:
    import os

    from _pin import affinity, omp_bind, parse_cpus

    assert parse_cpus(None) is None and parse_cpus("") is None
    assert parse_cpus("0,2-3") == {0, 2, 3}
    assert omp_bind({3, 0, 2}) == "0,2,3"
    before = os.sched_getaffinity(0)
    one = {min(before)}
    with affinity(one):
        assert os.sched_getaffinity(0) == one
    assert os.sched_getaffinity(0) == before


def test_gateway_overhead_cpu_c64_results_say_what_the_readme_says() -> None:
    for name, ratio, cpu in (
        ("gateway_overhead_cpu-vllm-c64.json", 0.914, 1.18),
        ("gateway_overhead_cpu-vllm-c64-pinned.json", 1.012, 1.23),
    ):
        s = _load(name)["summary"]
        assert s["llmdeck"]["paired_throughput_ratio_median"] == pytest.approx(ratio, abs=5e-4)
        assert s["llmdeck"]["proxy_cpu_s_per_1000_requests"] == pytest.approx(cpu, abs=5e-3)
        assert s["litellm"]["proxy_cpu_s_per_1000_requests"] > 30 * cpu


def test_gateway_h200_results_meet_issue_19s_targets_as_the_readmes_say() -> None:
    """Session 12's H200 run: recomputed from its raw rounds, the figures benchmarks/README.md and
    docs/guide/gateway.md quote."""
    from gateway_overhead import summarize

    doc = _load("gateway_overhead_h200-c64.json")
    again = summarize(doc["runs"])
    llmdeck = again["llmdeck"]
    assert llmdeck["paired_throughput_ratio_median"] == pytest.approx(1.002, abs=5e-4)
    assert min(llmdeck["round_throughput_ratios"]) >= 0.98
    assert llmdeck["paired_added_ttft_p50_ms_median"] == pytest.approx(0.96, abs=5e-3)
    assert llmdeck["paired_added_ttft_p50_ms_median"] <= 1.0
    assert llmdeck["added_ttft_p50_ms"] == pytest.approx(-5.39, abs=5e-3)
    assert llmdeck["proxy_cpu_s_per_1000_requests"] == pytest.approx(4.79, abs=5e-3)
    assert again["litellm"]["paired_throughput_ratio_median"] == pytest.approx(0.134, abs=5e-4)
    assert again == doc["summary"]
    soak = _load("gateway_soak_h200-c256.json")["result"]
    assert soak["ok"] == 91408 and soak["failed"] == 0 and soak["completion_tokens"] == {"64": 91408}
    assert soak["rss_growth"] < 0.05 and soak["rss_growth"] == pytest.approx(0.0071, abs=5e-5)
    assert soak["client_in_flight_min"] == 256 and soak["gateway_in_flight_median"] == 256


def test_litellm_version_is_a_label_not_a_precondition(tmp_path: Path) -> None:
    """No interpreter beside the launcher (the first session-12 H200 run): None, not a crash."""
    from gateway_overhead import litellm_version

    launcher = tmp_path / "bin" / "litellm"
    assert litellm_version(None) is None
    assert litellm_version(str(launcher)) is None
    launcher.parent.mkdir()
    (launcher.parent / "python").symlink_to(sys.executable)
    assert litellm_version(str(launcher)) is None  # this interpreter has no litellm: still a label


def test_dashboard_polling_costs_what_the_readme_says() -> None:
    """Issue 37: one tab polling /ui/api/state every 2 s costs < 1% of the gateway's CPU at 64 streams."""
    from _ui_poll import ui_summary

    doc = _load("gateway_overhead_fake-c64-ui.json")
    again = ui_summary(doc["runs"], doc["ui"]["poll_cost"], doc["params"]["poll_ui"])
    assert again == doc["ui"]
    assert doc["params"]["concurrency"] == 64 and again["polls_during_load"] >= 40 and again["bad_polls"] == 0
    assert again["poll_cost"]["cpu_ms_per_poll"] == pytest.approx(1.98, abs=5e-3)
    assert again["direct_share_of_gateway_cpu"] == pytest.approx(0.0025, abs=5e-5)
    assert again["direct_share_of_gateway_cpu"] < 0.01
