"""The figures the README, docs/ and benchmarks/README.md state, recomputed from the result files they
cite: the headline ratios (llama.cpp vs vLLM, the tune's pick, the gateway's cost) from the per-request
or per-round data, and benchmarks/README.md's agreement tables from their agreement_*.json runs. A figure
that no longer follows from its result file (a typo, a double rounding, a stale copy) fails here."""

from __future__ import annotations

import gzip
import json
import re
import shlex
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


# The plan's accuracy against vLLM's start-up lines: evidence/plan/compare.py's compare.json (issue 4 and
# the families' round 1) and evidence/plan/families/compare.py's tables (rounds 2-5), run here in-process.
PLAN = ROOT / "evidence" / "plan"
FAMILIES = PLAN / "families"
CONFIGS = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs"
ISSUE4_MODELS = {
    "qwen3-0.6b": "Qwen3-0.6B",
    "qwen3-30b-a3b": "Qwen3-30B-A3B",
    "qwen3.6-35b-a3b": "Qwen3.6-35B-A3B",
}


def _pcts(rows: list[dict[str, Any]], *keys: str) -> dict[int, float]:
    """Each compared run's largest predicted error over `keys`, in percent, signed."""
    out = {}
    for r in rows:
        if "checks" in r:
            errs = [r["checks"]["predicted"]["rel_errors"][k] * 100 for k in keys]
            out[r["run"]] = max(errs, key=abs)
    return out


def _minus(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


@pytest.mark.parametrize("folder", ["results", "families/results"])
def test_the_plan_compare_json_is_todays_planner(folder: str, tmp_path: Path) -> None:
    """compare.json's llmdeck figures are what the planner says today for the same request compare.py makes
    (`llmdeck plan DIR --machine h200 --engine venv --vllm-version V --json [--kv-cache-memory-gib G]`)."""
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.planner import PlanRequest, make_plan

    catalog = load_catalog()
    roots = {"results": tmp_path, "families/results": FAMILIES / "configs"}
    for name, cfg in ISSUE4_MODELS.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_bytes((CONFIGS / f"{cfg}.config.json").read_bytes())
    for row in [r for r in _json(PLAN / folder / "compare.json")["rows"] if "checks" in r]:
        for key, kv in (
            ("llmdeck_given_available", row["vllm"]["available_gib"]),
            ("llmdeck_predicted", None),
        ):
            req = PlanRequest(
                model=str(roots[folder] / row["model"]),
                machine="h200",
                engine="venv",
                vllm_version=row["vllm"].get("vllm_version", "0.22.0"),
                vllm_args=shlex.split(row["flags"]),
                kv_cache_memory_gib=kv,
            )
            cap = make_plan(req, catalog=catalog, raise_if_impossible=False).memory.capacity
            got = {"kv_tokens": cap.kv_cache_tokens, "max_concurrency": cap.max_concurrency}
            assert got == {k: row[key][k] for k in got}, (folder, row["run"], key)


def test_the_issue4_and_round1_figures_follow_from_compare_json() -> None:
    rows = _json(PLAN / "results" / "compare.json")["rows"]
    within = f"{max(abs(e) for e in _pcts(rows, 'kv_tokens', 'max_concurrency').values()):.2f}"
    avail = {True: 0.0, False: 0.0}  # hybrid -> largest |planned - vLLM's| available GiB
    for r in [r for r in rows if "checks" in r]:
        hybrid = r["vllm"]["block_size"] > 16
        avail[hybrid] = max(
            avail[hybrid], abs(r["llmdeck_predicted"]["available_gib"] - r["vllm"]["available_gib"])
        )
    assert f"KV tokens and max concurrency within {within}%" in _text("docs", "evidence.md")
    assert (
        f"today's planner (compare.md): all 11 within {within}% (available memory within {avail[False]:.2f} "
        f"GiB on dense/MoE and {avail[True]:.2f} GiB on the hybrid)"
        in _text("evidence", "plan", "results", "README.md")
    )
    fam = _text("evidence", "plan", "families", "results", "README.md")
    assert f"issue-4 Qwen runs (evidence/plan/results) agree within {within}%" in fam
    rows = _json(FAMILIES / "results" / "compare.json")["rows"]
    both, kv = _pcts(rows, "kv_tokens", "max_concurrency"), _pcts(rows, "kv_tokens")
    given = max(
        abs(r["checks"]["given"]["rel_errors"][k]) * 100
        for r in rows
        for k in ("kv_tokens", "max_concurrency")
    )
    glm = next(r["run"] for r in rows if r["model"] == "glm-4.7-flash")
    rest = max(abs(e) for run, e in both.items() if run != glm)
    assert f"largest GLM-4.7-Flash {kv[glm]:+.2f}% (" in fam and f"the rest within {rest:.2f}%" in fam
    oss, deepseek = (
        next(r["run"] for r in rows if r["model"] == m) for m in ("gpt-oss-120b", "deepseek-v2-lite-chat")
    )
    assert f"gpt-oss-120b +5.56% → -0.10% then, {kv[oss]:+.2f}% now" in fam
    assert f"DeepSeek-V2-Lite +0.35% → +0.12% then, {kv[deepseek]:+.2f}% now" in fam
    assert (
        f"within {given:.2f}% given vLLM's available memory, within {max(map(abs, both.values())):.1f}% from"
        in (_text("docs", "evidence.md"))
    )


def _round_kv(folder: str, version: str | None = None) -> dict[int, tuple[str, int, float]]:
    """A round's KV tokens as families/compare.py plans them ("plan own"): run -> (model, tokens, %)."""
    from llmdeck.plan.machine import GIB
    from llmdeck.plan.planner import PlanRequest, make_plan

    total = _json(FAMILIES / folder / "device.json").get("gpu_total_bytes", 150122463232) / GIB
    out = {}
    for line in (FAMILIES / folder / "runs.jsonl").read_text().splitlines():
        run = json.loads(line)
        text = (FAMILIES / folder / "logs" / Path(run["log"]).name).read_text(errors="replace")
        seen = re.search(r"GPU KV cache size: ([\d,]+) tokens", text)
        if run.get("status") != "ok" or not seen:
            continue
        logged = re.search(r"Initializing a V1 LLM engine \(v([\d.]+)\)", text)
        req = PlanRequest(
            model=str(FAMILIES / "configs" / run["model"]),
            machine="h200",
            engine="venv",
            vllm_version=version or (logged[1] if logged else "0.22.0"),
            vllm_args=shlex.split(run["flags"]),
            total_gib=total,
        )
        tokens, vllm = (
            make_plan(req, raise_if_impossible=False).memory.capacity.kv_cache_tokens,
            int(seen[1].replace(",", "")),
        )
        out[run["run"]] = (run["model"], tokens, (tokens / vllm - 1) * 100)
    return out


ROUNDS = ("results-round2", "results-v0.26", "results-v0.26-compiled", "results-v0.22-compiled")


@pytest.mark.parametrize("folder", ROUNDS)
def test_the_rounds_tables_show_todays_plan(folder: str) -> None:
    """The last column of each round's table ("plan, own memory model" / "plan now") is today's plan."""
    lines = (FAMILIES / folder / "README.md").read_text(encoding="utf-8").splitlines()
    for run, (_, tokens, pct) in _round_kv(folder).items():
        cell = next(ln for ln in lines if ln.startswith(f"| {run} |")).split("|")[-2].strip()
        shown = re.match(r"([\d,]+) \(([−+-]?[\d.]+)%\)", cell)
        assert shown, cell
        assert (shown[1], float(shown[2].replace("−", "-"))) == (f"{tokens:,}", round(pct, 2)), (run, cell)


def test_the_rounds_ranges_in_the_evidence_index_are_todays_plan() -> None:
    kv = {folder: _round_kv(folder) for folder in ROUNDS}
    widest = {f: max(abs(p) for _, _, p in rows.values()) for f, rows in kv.items()}
    oss = {f: next(p for m, _, p in rows.values() if m == "gpt-oss-120b") for f, rows in kv.items()}
    r4 = [p for _, _, p in kv["results-v0.26-compiled"].values()]
    r5 = [p for m, _, p in kv["results-v0.22-compiled"].values() if m != "gpt-oss-120b"]
    _, tokens, pct = kv["results-round2"][1]
    _, _, old_rules = _round_kv("results-v0.26", version="0.22.0")[5]
    page = _text("docs", "evidence.md")
    assert f"1,336,268 planned before round 2 ran, {tokens:,} now ({pct:+.2f}%" in page
    assert f"within {widest['results-round2']:.2f}% from the plan's own memory model" in page
    assert f"{old_rules:+.1f}% under 0.22's rules, {oss['results-v0.26']:+.2f}% now" in page
    assert f"within {widest['results-v0.26']:.2f}% from the plan's own" in page
    assert f"KV tokens {_minus(min(r4))}%..{_minus(max(r4))}% now" in page
    assert (
        f"KV tokens {_minus(min(r5))}%..{_minus(max(r5))}%, "
        f"gpt-oss-120b {oss['results-v0.22-compiled']:+.2f}%" in page
    )
