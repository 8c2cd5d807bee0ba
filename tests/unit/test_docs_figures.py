"""The figures the README, docs/ and benchmarks/README.md state, recomputed from the result files they
cite: the headline ratios (llama.cpp vs vLLM, the tune's pick, the gateway's cost) from the per-request
or per-round data, and benchmarks/README.md's agreement tables from their agreement_*.json runs. A figure
that no longer follows from its result file (a typo, a double rounding, a stale copy) fails here."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from repo_paths import ROOT

RESULTS = ROOT / "benchmarks" / "results"
GPU = ROOT / "evidence" / "device" / "ollama" / "gpu"
HYBRID = ROOT / "evidence" / "device" / "ollama" / "hybrid"
METRICS = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")


def _text(*parts: str) -> str:
    """A page with its line breaks and runs of spaces folded, as a reader sees the sentence."""
    return " ".join(ROOT.joinpath(*parts).read_text(encoding="utf-8").split())


def _json(path: Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def _versus(path: Path) -> dict[str, float]:
    """bench --compare: each side's median TTFT per round from its requests, then the median of rounds."""
    d = _json(path)
    med = {}
    for side in ("a", "b"):
        rounds = [
            [r["ttft"] * 1000 for r in sc["requests"] if r["ok"]] for sc in d[side]["result"]["scenarios"]
        ]
        med[side] = statistics.median(statistics.median(t) for t in rounds)
    return {"a": med["a"], "b": med["b"], "ratio": med["b"] / med["a"]}


def test_the_readmes_llamacpp_ratios_follow_from_the_compare_files() -> None:
    c1, c8 = _versus(GPU / "compare-qwen3-8b-c1.json.gz"), _versus(GPU / "compare-qwen3-8b-c8.json.gz")
    long = _versus(GPU / "long" / "compare-qwen3-8b-c1-long.json.gz")
    h1, h8 = _versus(HYBRID / "compare-c1.json.gz"), _versus(HYBRID / "compare-c8.json.gz")
    hl = _versus(HYBRID / "compare-c1-long.json.gz")
    readme = _text("README.md")
    assert (
        f"TTFT is {c1['ratio']:.1f}× lower one session at a time, {c8['ratio']:.0f}× with 8 sessions at once "
        f"and {long['ratio']:.0f}× on long sessions" in readme
    )
    assert f"Q4_K GGUF, {h1['ratio']:.1f}×, {h8['ratio']:.1f}× and {hl['ratio']:.1f}×" in readme
    guide = _text("docs", "guide", "ollama.md")
    for row, places in ((c1, 1), (c8, 1), (h1, 1), (h8, 1), (long, 0), (hl, 1)):
        shown = f"{row['a']:,.0f} / {row['b']:,.0f} ms ({row['ratio']:.{places}f}×"
        assert shown in guide, shown


def _goodput_medians(trials: Path) -> dict[int, float]:
    out = {}
    for line in trials.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "llmdeck.tune.trial":
            out[rec["number"]] = statistics.median(rec["metrics"]["goodput_runs"])
    return out


def test_the_tunes_headline_follows_from_its_trials() -> None:
    goodput = _goodput_medians(ROOT / "evidence" / "tune" / "h200" / "s15" / "trials.jsonl")
    pick, seed = goodput[3] / goodput[1], goodput[3] / goodput[2]
    assert f"**{pick:.2f}×** vLLM's defaults' goodput" in _text("README.md")
    assert f"The pick is **{pick:.2f}×** vLLM's defaults and **{seed:.0f}×** seed 000" in _text(
        "docs", "guide", "tune.md"
    )


def test_the_gateways_cost_follows_from_its_rounds() -> None:
    runs = _json(RESULTS / "gateway_overhead_h200-c64.json")["runs"]
    p50 = {t: [statistics.median(r["ttfts_ms"]) for r in rs] for t, rs in runs.items()}
    rate = {t: [r["events"] / r["wall_s"] for r in rs] for t, rs in runs.items()}
    added = statistics.median(g - d for g, d in zip(p50["llmdeck"], p50["direct"], strict=True))
    ratios = [g / d for g, d in zip(rate["llmdeck"], rate["direct"], strict=True)]
    assert f"costs +{added:.2f} ms of p50 TTFT at 64 streams" in _text("README.md")
    guide = _text("docs", "guide", "gateway.md")
    assert f"{statistics.median(ratios):.3f}x of direct's throughput round by round" in guide
    assert f"(every round {min(ratios):.3f}x or more) and +{added:.2f} ms" in guide


def _agreement(name: str) -> list[str]:
    """llmdeck / vLLM of the medians over runs of the four metrics, as the tables print them."""
    runs = _json(RESULTS / name)["runs"]
    med = {t: [statistics.median(r[m] for r in runs[t]) for m in METRICS] for t in ("vllm", "llmdeck")}
    return [f"{b / a:.3f}" for a, b in zip(med["vllm"], med["llmdeck"], strict=True)]


# A row of benchmarks/README.md's ratio tables (its opening cells, unique in the page) and its result.
TABLE_ROWS = {
    "| CPU, tiny Qwen3, 24 x 256/64, c4 (5 runs) |": "agreement_cpu.json",
    "| H200 0.6B, 20 x 512/256 @ 1 req/s |": "agreement_h200-1rps.json",
    "| H200 0.6B, same, first attempt (older sampler) |": "agreement_h200-1rps-first-try.json",
    "| H200 0.6B, 160 x 512/256, c16 |": "agreement_h200-c16.json",
    "| 1 req/s, 30 x 512/256 |": "agreement_h200-1rps-v2.json",
    "| 16 concurrent, 320 x 512/256 |": "agreement_h200-c16-v2.json",
    "| a seed per tool, unpinned (`agreement_cpu-1rps-seedfix.json`) |": "agreement_cpu-1rps-seedfix.json",
    "| a seed per tool, pinned (`agreement_cpu-1rps-pinned.json`) |": "agreement_cpu-1rps-pinned.json",
    "| same prompts per pair, no prefix caching (`agreement_cpu-1rps-same-prompts.json`) |": (
        "agreement_cpu-1rps-same-prompts.json"
    ),
    "| same prompts and same arrival times (`agreement_cpu-1rps-same-workload.json`) |": (
        "agreement_cpu-1rps-same-workload.json"
    ),
    "| v3, both loads at once | 1 req/s, 20 prompts |": "agreement_h200-1rps-v3.json",
    "| v3, both loads at once | 16 concurrent, 320 prompts, equal lengths |": "agreement_h200-c16-v3.json",
    "| v4, one load at a time | 1 req/s, 20 prompts |": "agreement_h200-1rps-v4.json",
    "| v5, both loads at once | 1 req/s, 20 prompts |": "agreement_h200-1rps-v5.json",
    "| v5, both loads at once | 16 concurrent, 400 prompts, range ratio 0.5 |": "agreement_h200-c16-v5.json",
    "| v6 | 1 req/s, 20 prompts |": "agreement_h200-1rps-v6.json",
    "| v6 | 16 concurrent, 96 prompts, range ratio 0.5 (2 pairs) |": "agreement_h200-c16-v6.json",
    "| v7 | 1 req/s, 30 prompts |": "agreement_h200-1rps-v7.json",
    "| v7 | 16 concurrent, 40 prompts, range ratio 0.5 |": "agreement_h200-c16-v7.json",
}


@pytest.mark.parametrize("row", TABLE_ROWS, ids=lambda r: TABLE_ROWS[r])
def test_the_agreement_tables_follow_from_their_results(row: str) -> None:
    line = next(
        ln for ln in (ROOT / "benchmarks" / "README.md").read_text().splitlines() if ln.startswith(row)
    )
    shown = re.findall(r"\d+\.\d{3}", line[len(row) :].replace("*", ""))[:4]
    assert shown == _agreement(TABLE_ROWS[row]), line


def test_the_acceptance_figures_follow_from_v9_and_v12() -> None:
    c16, v12 = _agreement("agreement_h200-c16-v9.json"), _agreement("agreement_h200-1rps-v12.json")
    for page in (_text("benchmarks", "README.md"), _text("docs", "evidence.md")):
        assert f"TTFT {c16[0]}, TPOT {c16[1]}, ITL {c16[2]}" in page
        assert f"TTFT {v12[0]}, TPOT {v12[1]}, ITL {v12[2]}, tok/s {v12[3]}" in page


def test_the_quiet_cpu_runs_tpot_ranges_follow_from_their_runs() -> None:
    runs = _json(RESULTS / "agreement_cpu-1rps-quiet.json")["runs"]
    lo_hi = {
        t: (min(r["mean_tpot_ms"] for r in rs), max(r["mean_tpot_ms"] for r in rs)) for t, rs in runs.items()
    }
    (v_lo, v_hi), (l_lo, l_hi) = lo_hi["vllm"], lo_hi["llmdeck"]
    shown = f"ranged {v_lo:.1f}–{v_hi:.1f} ms (vLLM) and {l_lo:.1f}–{l_hi:.1f} ms (llmdeck)"
    assert shown in _text("benchmarks", "README.md")


def test_the_v3_to_v5_pair_differences_follow_from_their_runs() -> None:
    diffs = []
    for series in ("v3", "v4", "v5"):
        runs = _json(RESULTS / f"agreement_h200-1rps-{series}.json")["runs"]
        diffs += [
            b["mean_ttft_ms"] - a["mean_ttft_ms"] for a, b in zip(runs["vllm"], runs["llmdeck"], strict=True)
        ]
    shown = ", ".join(f"{d:+.1f}" for d in sorted(diffs)[:-1]) + f" and {sorted(diffs)[-1]:+.1f} ms"
    page = _text("benchmarks", "README.md")
    assert f"were {shown}: median {statistics.median(diffs):+.1f} ms" in page


def test_the_switch_soaks_gpu_peak_follows_from_nvidia_smi() -> None:
    """The soak sampled nvidia-smi's used MiB; the GPU's total is the start's nvidia-smi table."""
    layer = ROOT / "evidence" / "device" / "serving-layer"
    used = re.findall(r"^(\d+) MiB, \d+ %$", (layer / "soak" / "nvidia-smi.txt").read_text(), re.M)
    total = int(re.findall(r"/ (\d+)MiB", (layer / "main" / "nvidia-smi-start.txt").read_text())[0])
    peak = max(int(u) for u in used)
    assert f"peaked at {peak:,} of {total:,} MiB" in _text("evidence", "device", "serving-layer", "README.md")
    shown = f"GPU peak {peak / 1024:.1f} of {total / 1024:.1f} GiB"
    assert shown in _text("evidence", "gateway-models", "README.md")


def test_the_sleep_tables_starts_follow_from_their_runs() -> None:
    """Each row's utilization is what vLLM ran with (its default where the log's non-default args have
    none) and its first TTFT after the cold start is the run's cold.json."""
    from llmdeck.plan.settings import DEFAULT_GPU_MEMORY_UTILIZATION

    layer = ROOT / "evidence" / "device" / "serving-layer"
    rows = {
        "| Qwen3-Coder-30B-A3B, eager, util": (layer / "sleep-fresh", "cold.json", "vllm-main.log"),
        "| Qwen3-Coder-30B-A3B, compiled, util": (layer / "main", "cold.json", "vllm-main.log"),
        "| Qwen3-0.6B, eager, util": (layer / "sleep" / "small", "qwen3-0.6b-cold.json", "logs"),
    }
    lines = (layer / "README.md").read_text(encoding="utf-8").splitlines()
    for start, (folder, cold_file, log) in rows.items():
        cells = [c.strip() for c in next(ln for ln in lines if ln.startswith(start)).split("|")]
        cold = _json(folder / cold_file)
        first, warm = cold["ttft_first_after_cold_start_s"], cold["ttft_warm_s"]
        assert cells[3] == f"{first:.2f} s (warm {warm:.2f} s)", cells
        logs = [folder / log] if (folder / log).is_file() else sorted((folder / log).rglob("*.log"))
        args = next(ln for p in logs for ln in p.read_text().splitlines() if "non-default args" in ln)
        util = re.search(r"'gpu_memory_utilization': ([0-9.]+)", args)
        shown = re.search(r"util ([0-9.]+)", cells[1])
        assert shown and float(shown[1]) == (float(util[1]) if util else DEFAULT_GPU_MEMORY_UTILIZATION), (
            cells
        )


@pytest.mark.parametrize("folder", ["agents-clients", "agents-clients-2.1.332"])
def test_the_real_clients_exit_codes_and_times_follow_from_their_run(folder: str) -> None:
    """agents.txt has each launch's exit code and milliseconds; the README's table and prose say the same."""
    here = ROOT / "evidence" / "device" / folder
    runs = dict(re.findall(r"^([\w-]+): exit (\d+ in \d+) ms$", (here / "agents.txt").read_text(), re.M))
    lines = (here / "README.md").read_text(encoding="utf-8").splitlines()
    for name, got in runs.items():
        code, ms = got.split(" in ")
        cells = [c.strip() for c in next(ln for ln in lines if ln.startswith(f"| `{name}` |")).split("|")]
        assert re.sub(r"\D", "", cells[3].split("(")[0]) == code, cells
        shown = cells[4].removesuffix(" s")
        assert f"{int(ms) / 1000:.{len(shown.partition('.')[2])}f}" == shown, (name, ms, cells)
    wrong = sorted(int(ms) for n, got in runs.items() if "wrongkey" in n for ms in [got.split(" in ")[1]])
    said = re.search(
        r"the fix,? in (under )?([0-9.]+)(?:-([0-9.]+))? s", _text("evidence", "device", folder, "README.md")
    )
    assert said, "the README says how fast a wrong key stops launch"
    if said[1]:  # "under X s": every wrong-key run was
        assert wrong[-1] < float(said[2]) * 1000, (wrong, said[0])
    else:  # "X s" or "X-Y s": the fastest and the slowest
        assert (said[2], said[3] or said[2]) == (f"{wrong[0] / 1000:.2f}", f"{wrong[-1] / 1000:.2f}"), said[0]


def _last_turn(path: Path) -> tuple[float, float]:
    """Each side's median TTFT of the last turn over both rounds' requests (the READMEs' by-turn tables)."""
    d = _json(path)
    out = []
    for side in ("a", "b"):
        reqs = [r for sc in d[side]["result"]["scenarios"] for r in sc["requests"] if r["ok"]]
        last = max(r["turn"] for r in reqs)
        out.append(statistics.median(r["ttft"] * 1000 for r in reqs if r["turn"] == last))
    return out[0], out[1]


def test_the_guides_last_turn_figures_are_the_by_turn_tables() -> None:
    guide = _text("docs", "guide", "ollama.md")
    for path in (GPU / "long" / "compare-qwen3-8b-c1-long.json.gz", HYBRID / "compare-c1-long.json.gz"):
        a, b = _last_turn(path)
        assert f"{a:,.0f} / {b:,.0f} at turn 8" in guide, (path.name, a, b)
