"""Agreement of llmdeck's measurements with `vllm bench serve` on the same server and workload.

Runs vLLM, llmdeck, llmdeck, vLLM, ... (interleaved, order alternating; both tools of a pair send
the same prompts, a fresh seed per pair; ``--runs`` each, default 3) on one random
workload against one server (start it with --no-enable-prefix-caching: the harness records the
server's prefix-cache hits per run) and compares the medians of mean TTFT, mean TPOT, mean ITL and
output throughput; acceptance: every ratio within 3%.

  python benchmarks/agreement_cpu.py                          # the CPU dev server (tiny Qwen3)
  python benchmarks/agreement_cpu.py --base-url http://127.0.0.1:8000 --model qwen3-0.6b \\
      --tokenizer /root/models/qwen3-0.6b --input-len 512 --output-len 256 --num-prompts 60 \\
      --request-rate 1                                        # H200, 1 req/s
  ... --max-concurrency 16 --num-prompts 160                  # H200, 16 concurrent

Block-interleaved (each run = --blocks blocks alternating with the other tool's, the same prompts per
block), one long-lived process per tool, spread over several invocations against one server:

  ... --num-prompts 96 --blocks 3 --workers --no-ready-check --stop-after 500 --out r.json  # call 1
  ... (same flags) --resume --out r.json                                                   # call 2, ...
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import ROOT, add_workload_args, run_child
from server_referenced import referenced

KEYS = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")
TOLERANCE = 0.03


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_args(p)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--label", default="cpu")
    p.add_argument(
        "--warmup",
        action="store_true",
        help="first one unmeasured run of each tool (JIT, CUDA graphs and caches warm before measuring)",
    )
    p.add_argument("--warmup-prompts", type=int, default=48, help="prompts of each tool's warm-up run")
    p.add_argument(
        "--warmup-seconds",
        type=float,
        default=0.0,
        help="with --warmup: keep warming (16 concurrent, lengths spread by a range ratio of 0.5, the tools "
        "in turn) until this many seconds have passed; on the H200 the server's own TTFT at 1 req/s fell "
        "from ~105 to ~72 ms over its first ~20 minutes of traffic (v9)",
    )
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="run both tools of a pair at the same time (same prompts, started together), so that both "
        "measure the same engine state; the server's counters then cover both",
    )
    p.add_argument(
        "--blocks",
        type=int,
        default=1,
        help="split each run into this many blocks and interleave the two tools block by block "
        "(vLLM, llmdeck, llmdeck, vLLM, ...; the same prompts per block): a run is then the union of "
        "its blocks' requests, so both tools sample the engine over the same minutes. Engine drift "
        "slower than a block cancels; --num-prompts is per run and must divide by --blocks",
    )
    p.add_argument(
        "--workers",
        action="store_true",
        help="one long-lived process per tool for all blocks (imports, tokenizer and code paths paid once; "
        "a fresh `vllm bench serve` costs ~15 s before its first request) instead of a process per run",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the block pairs already saved in --out (same workload): a benchmark longer than one "
        "call of a lent machine runs over several calls against the same server",
    )
    p.add_argument(
        "--stop-after",
        type=float,
        default=None,
        help="seconds: start no block pair that would end after this (estimated from the pairs so far); "
        "with --resume, the next invocation carries on",
    )
    p.add_argument(
        "--pair-estimate",
        type=float,
        default=None,
        help="seconds one block pair takes, for --stop-after before any pair has been timed",
    )
    p.add_argument(
        "--control",
        choices=("vllm", "llmdeck"),
        default=None,
        help="A/A control: both slots (still named vllm and llmdeck in the result) run this one tool, so the "
        "ratios show how far two runs of the same client on the same prompts and send times differ on this "
        "server: the noise floor the 3%% test sits on",
    )
    p.add_argument(
        "--fake-paced",
        action="store_true",
        help="measure benchmarks/fake_paced_server.py (exact TTFT 40 ms, ITL 10 ms) instead of --base-url",
    )
    return p


def main() -> int:
    a = build_parser().parse_args()
    fake = None
    if a.fake_paced:
        import socket
        import subprocess
        import time

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        script = Path(__file__).resolve().parent / "fake_paced_server.py"
        fake = subprocess.Popen([sys.executable, str(script), "--port", str(port)])
        time.sleep(1.0)
        a.base_url, a.model = f"http://127.0.0.1:{port}", "fake-paced"
        a.label = a.label if a.label != "cpu" else "fake-paced"
    try:
        return _run(a)
    finally:
        if fake is not None:
            fake.terminate()
            fake.wait(10)


SERVER_SERIES = {
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "ttft_sum": "vllm:time_to_first_token_seconds_sum",
    "ttft_count": "vllm:time_to_first_token_seconds_count",
    "itl_sum": "vllm:inter_token_latency_seconds_sum",
    "itl_count": "vllm:inter_token_latency_seconds_count",
}


TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket{"


def server_counters(base_url: str) -> dict[str, float] | None:
    """The server's own counters (summed over engines), None when /metrics is not there.

    Besides the prefix-cache hits, vLLM's TTFT and inter-token-latency histograms: their deltas over
    one run give the server's mean TTFT (request arrival in the API server to first token) and ITL,
    a reference that no client overhead is part of."""
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(TTFT_BUCKET) and 'le="' in line:
            # the TTFT histogram's cumulative buckets: where in the distribution a run's mean moved
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[f"ttft_le_{le}"] = out.get(f"ttft_le_{le}", 0.0) + float(line.rsplit(" ", 1)[1])
            continue
        for key, name in SERVER_SERIES.items():
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def server_view(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any]:
    """Deltas of one run: prefix-cache hits, and the server's mean TTFT / ITL in ms."""
    if before is None or after is None:
        return {
            "prefix_cache_hits": None,
            "server_mean_ttft_ms": None,
            "server_mean_itl_ms": None,
            "server_ttft_le_s": None,
        }

    def delta(key: str) -> float | None:
        return after[key] - before[key] if key in after and key in before else None

    def mean_ms(kind: str) -> float | None:
        s, n = delta(f"{kind}_sum"), delta(f"{kind}_count")
        return 1000 * s / n if s is not None and n else None

    buckets = {k[len("ttft_le_") :]: delta(k) for k in after if k.startswith("ttft_le_")}
    return {
        "prefix_cache_hits": delta("prefix_cache_hits"),
        "server_mean_ttft_ms": mean_ms("ttft"),
        "server_mean_itl_ms": mean_ms("itl"),
        "server_ttft_le_s": buckets or None,  # cumulative counts of the server's TTFT histogram
    }


def _report(a: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], base_seed: int) -> dict[str, Any]:
    done = min(len(runs["vllm"]), len(runs["llmdeck"]))
    medians = (
        {tool: {k: statistics.median(r[k] for r in rs) for k in KEYS} for tool, rs in runs.items()}
        if done
        else {}
    )
    ratios = {k: medians["llmdeck"][k] / medians["vllm"][k] for k in KEYS} if done else {}
    overhead = {
        tool: statistics.median(r["client_ttft_overhead_ms"] for r in rs)
        for tool, rs in runs.items()
        if rs and all(r.get("client_ttft_overhead_ms") is not None for r in rs)
    }
    return {
        "benchmark": "agreement",
        "label": a.label,
        # A/A control: both slots ran this one tool (None: the vllm slot ran vLLM, the llmdeck slot llmdeck)
        "control": getattr(a, "control", None),
        "date": datetime.now(UTC).isoformat(),
        "host": platform.node(),
        "workload": {
            "base_url": a.base_url,
            "model": a.model,
            "input_len": a.input_len,
            "output_len": a.output_len,
            "num_prompts": a.num_prompts,
            "max_concurrency": a.max_concurrency,
            "request_rate": a.request_rate or "inf",
            "burstiness": a.burstiness if a.request_rate else None,
            "endpoint": "/v1/completions",
            "range_ratio": a.range_ratio,
            "temperature": a.temperature,  # None: not sent, the server's default
            "ignore_eos": True,
            "seeds": [base_seed + i for i in range(a.runs)],
            "same_prompts_for_both_tools": True,
            "warmup": a.warmup,
            "blocks_per_run": a.blocks,
            "order": "side by side (both tools at once)"
            if a.side_by_side
            else "alternating (vllm first in odd runs, llmdeck first in even runs)"
            + (f"; each run is {a.blocks} blocks, interleaved block by block" if a.blocks > 1 else ""),
        },
        "runs_planned": a.runs,
        "runs_done": done,
        "runs": runs,
        "medians": medians,
        "ratios_llmdeck_over_vllm": ratios,
        "median_client_ttft_overhead_ms": overhead,
        # each run's client figure over the server's own figure for the same run (None when the
        # server has no /metrics or the runs were side by side): the engine's drift divided out
        "server_referenced": referenced({"runs": runs}) if done else None,
        "tolerance": TOLERANCE,
        "within_tolerance": bool(done) and all(abs(r - 1) <= TOLERANCE for r in ratios.values()),
    }


def _save(out: Path, report: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(out)


def _side_by_side(a: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], i: int) -> None:
    """Both tools at once: each child builds its prompts, then waits for a common start time."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    b = argparse.Namespace(**vars(a))
    b.start_at = time.time() + 40.0  # > the vLLM child's import + tokenizer + prompt time
    before = server_counters(a.base_url)
    with ThreadPoolExecutor(2) as pool:
        futs = {tool: pool.submit(run_child, _tool(a, tool), b) for tool in ("vllm", "llmdeck")}
        reps = {tool: f.result() for tool, f in futs.items()}
    shared = server_view(before, server_counters(a.base_url))
    for tool, rep in reps.items():
        rep["seed"] = a.seed
        rep["side_by_side"] = True
        rep.update(shared)  # the server's counters cover both tools' requests
        if rep["server_mean_ttft_ms"]:
            rep["client_ttft_overhead_ms"] = rep["mean_ttft_ms"] - rep["server_mean_ttft_ms"]
        runs[tool].append(rep)
        print(f"run {i + 1} {tool:8s} " + " ".join(f"{k}={rep[k]:.3f}" for k in KEYS), flush=True)


def _union(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures from its blocks, as vLLM computes them over all of the run's requests.

    Means over requests weight each block by its completed requests (TTFT, TPOT: every request has
    more than one output token here), ITL by its inter-token gaps (chunks - requests, one token per
    chunk), and output throughput is all output tokens over the blocks' summed durations."""
    n = sum(b["completed"] for b in blocks)
    gaps = sum(b["chunks"] - b["completed"] for b in blocks)
    dur = sum(b["duration_s"] for b in blocks)
    out: dict[str, Any] = {
        "tool": blocks[0]["tool"],
        "completed": n,
        "failed": sum(b["failed"] for b in blocks),
        "mean_ttft_ms": sum(b["mean_ttft_ms"] * b["completed"] for b in blocks) / n,
        "mean_tpot_ms": sum(b["mean_tpot_ms"] * b["completed"] for b in blocks) / n,
        "mean_itl_ms": sum(b["mean_itl_ms"] * (b["chunks"] - b["completed"]) for b in blocks) / gaps,
        "output_throughput": sum(b["total_output_tokens"] for b in blocks) / dur,
        "duration_s": dur,
    }
    for k in (
        "total_input_tokens",
        "total_output_tokens",
        "chunks",
        "phase_cpu_s",
        "phase_wall_s",
        "process_cpu_s",
    ):
        out[k] = sum(b.get(k) or 0 for b in blocks)
    out["blocks"] = blocks
    return out


def _block_seed(base_seed: int, idx: int, blocks: int) -> int:
    """Block idx (0-based over the whole benchmark) of run idx // blocks: same prompts for both tools."""
    return 1000 * (base_seed + idx // blocks + 1) + idx % blocks


def _tool(a: argparse.Namespace, slot: str) -> str:
    """The client that fills a slot ("vllm" or "llmdeck"): itself, or the --control tool in both."""
    return getattr(a, "control", None) or slot


def _measure(tool: str, b: argparse.Namespace, workers: dict[str, Any] | None) -> dict[str, Any]:
    """One measurement of one tool, with the server's counters read around it."""
    before = server_counters(b.base_url)
    rep = workers[tool].run(b) if workers else run_child(_tool(b, tool), b)
    after = server_counters(b.base_url)
    rep.update(server_view(before, after))
    if before is not None and after is not None:
        rep["server_counters"] = {k: after[k] - before.get(k, 0.0) for k in SERVER_SERIES if k in after}
    rep["seed"] = b.seed
    return rep


def _runs_from_pairs(
    pairs: list[dict[str, Any]], blocks: int, base_seed: int
) -> dict[str, list[dict[str, Any]]]:
    """Complete runs (``blocks`` consecutive block pairs each) as vLLM would compute them over the
    union of their requests; the server's counters are summed over each tool's blocks."""
    runs: dict[str, list[dict[str, Any]]] = {"vllm": [], "llmdeck": []}
    for i in range(len(pairs) // blocks):
        chunk = pairs[i * blocks : (i + 1) * blocks]
        for tool in runs:
            bs = [pr[tool] for pr in chunk]
            rep = _union(bs)
            rep["seed"] = base_seed + i
            keys = ("ttft_sum", "ttft_count", "itl_sum", "itl_count", "prefix_cache_hits")
            summed = {k: sum(b.get("server_counters", {}).get(k, 0.0) for b in bs) for k in keys}
            have = all(b.get("server_counters") for b in bs)
            zero = {k: 0.0 for k in keys}
            view = server_view(zero, summed) if have else server_view(None, None)
            view.pop("server_ttft_le_s", None)
            rep.update(view)
            if rep["server_mean_ttft_ms"]:
                rep["client_ttft_overhead_ms"] = rep["mean_ttft_ms"] - rep["server_mean_ttft_ms"]
            tot = [
                (b.get("total_input_tokens"), b.get("total_output_tokens"))
                for b in (pr["vllm"] for pr in chunk)
            ]
            tot2 = [
                (b.get("total_input_tokens"), b.get("total_output_tokens"))
                for b in (pr["llmdeck"] for pr in chunk)
            ]
            rep["same_token_totals_as_peer"] = tot == tot2
            runs[tool].append(rep)
    return runs


def _run_blocks(a: argparse.Namespace, out: Path, base_seed: int) -> dict[str, Any]:
    """--runs x --blocks block pairs, saved after each; --resume continues a saved file, --stop-after
    ends this invocation before a pair that would not finish in time."""
    import time

    if a.num_prompts % a.blocks:
        raise SystemExit(f"--num-prompts {a.num_prompts} does not divide into {a.blocks} blocks")
    t0 = time.monotonic()
    pairs: list[dict[str, Any]] = []
    if a.resume and out.exists():
        saved = json.loads(out.read_text())
        same = {
            k: saved["workload"].get(k)
            for k in ("model", "input_len", "output_len", "num_prompts", "blocks_per_run", "temperature")
        }
        want = {
            "model": a.model,
            "input_len": a.input_len,
            "output_len": a.output_len,
            "num_prompts": a.num_prompts,
            "blocks_per_run": a.blocks,
            "temperature": a.temperature,
        }
        if same != want:
            raise SystemExit(f"--resume: {out} holds another workload ({same}, not {want})")
        if saved.get("control") != getattr(a, "control", None):
            had = saved.get("control")
            raise SystemExit(f"--resume: {out} holds a run with --control {had}, not {a.control}")
        pairs = saved.get("block_pairs") or []
        print(f"resuming after {len(pairs)} block pairs", flush=True)
    b = argparse.Namespace(**vars(a))
    b.num_prompts = a.num_prompts // a.blocks
    workers = None
    if a.workers:
        from _harness import Worker

        workers = {slot: Worker(_tool(a, slot)) for slot in ("vllm", "llmdeck")}
    try:
        if a.warmup and not pairs:
            _warmup(a, workers)
        spent: list[float] = []
        for idx in range(len(pairs), a.runs * a.blocks):
            est = max(spent) if spent else max((pr.get("pair_wall_s") or 0.0 for pr in pairs), default=0.0)
            est = est or (a.pair_estimate or 0.0)
            if a.stop_after is not None and time.monotonic() - t0 + est > a.stop_after:
                print(
                    f"stopping before block pair {idx + 1}: {est:.0f} s would pass --stop-after", flush=True
                )
                break
            b.seed = _block_seed(base_seed, idx, a.blocks)
            order = ("vllm", "llmdeck") if idx % 2 == 0 else ("llmdeck", "vllm")
            w0 = time.monotonic()
            pair: dict[str, Any] = {
                "index": idx,
                "run": idx // a.blocks,
                "seed": b.seed,
                "order": list(order),
            }
            for tool in order:
                rep = pair[tool] = _measure(tool, b, workers)
                extra = (
                    f" server_ttft_ms={rep['server_mean_ttft_ms']:.3f}"
                    if rep.get("server_mean_ttft_ms")
                    else ""
                )
                print(
                    f"  block {idx + 1} {tool:8s} " + " ".join(f"{k}={rep[k]:.3f}" for k in KEYS) + extra,
                    flush=True,
                )
            pair["pair_wall_s"] = time.monotonic() - w0
            spent.append(pair["pair_wall_s"])
            pairs.append(pair)
            runs = _runs_from_pairs(pairs, a.blocks, base_seed)
            _save(out, _report(a, runs, base_seed) | {"block_pairs": pairs})
    finally:
        if workers:
            for w in workers.values():
                w.close()
    runs = _runs_from_pairs(pairs, a.blocks, base_seed)
    return _report(a, runs, base_seed) | {"block_pairs": pairs}


def _warmup(a: argparse.Namespace, workers: dict[str, Any] | None) -> None:
    """A short burst at 16 concurrent through each tool, then (for a rate) a short run at twice the
    rate: the server's batch shapes, JIT kernels and both clients' code paths are warm before anything
    is measured."""
    warm = argparse.Namespace(**vars(a))
    warm.seed, warm.num_prompts, warm.max_concurrency, warm.request_rate = (
        a.seed + 999,
        a.warmup_prompts,
        16,
        None,
    )
    shapes = [warm]
    if a.request_rate:
        paced = argparse.Namespace(**vars(a))
        paced.seed, paced.num_prompts, paced.request_rate = a.seed + 998, 12, 2 * a.request_rate
        shapes.append(paced)
    import time

    t0 = time.monotonic()
    for w in shapes:
        for tool in ("vllm", "llmdeck"):
            rep = workers[tool].run(w) if workers else run_child(_tool(a, tool), w)
            print(f"warmup {tool:8s} " + " ".join(f"{k}={rep[k]:.3f}" for k in KEYS), flush=True)
    more = argparse.Namespace(**vars(warm))
    more.range_ratio = max(a.range_ratio, 0.5)
    i = 0
    while time.monotonic() - t0 < a.warmup_seconds:
        more.seed = a.seed + 2000 + i
        tool = ("vllm", "llmdeck")[i % 2]
        rep = workers[tool].run(more) if workers else run_child(_tool(a, tool), more)
        i += 1
        print(
            f"warmup {tool:8s} +{time.monotonic() - t0:.0f}s mean_ttft_ms={rep['mean_ttft_ms']:.3f}",
            flush=True,
        )


def _run(a: argparse.Namespace) -> int:
    out = a.out or ROOT / "benchmarks" / "results" / f"agreement_{a.label}.json"
    runs: dict[str, list[dict[str, Any]]] = {"vllm": [], "llmdeck": []}
    base_seed = a.seed
    if a.blocks > 1 or a.workers or a.resume:
        report = _run_blocks(a, out, base_seed)
        _save(out, report)
        return _summary(a, out, report)
    if a.warmup:
        _warmup(a, None)
    for i in range(a.runs):
        # Same server, same workload: both tools of a pair send the same prompts (one seed per pair;
        # llmdeck builds them with vLLM's RandomDataset procedure, so they are identical), and a fresh
        # seed per pair. The server must run with --no-enable-prefix-caching, or the second tool of a
        # pair is served from the first one's cache: in the H200 runs of 2026-11-29/30 the tool that ran
        # second had the lower mean TTFT in 11 of 14 pairs. Each run records the server's prefix-cache
        # hits to prove it. The order alternates so drift favours neither tool.
        a.seed = base_seed + i
        order = ("vllm", "llmdeck") if i % 2 == 0 else ("llmdeck", "vllm")
        if a.side_by_side:
            _side_by_side(a, runs, i)
            _save(out, _report(a, runs, base_seed))
            continue
        for tool in order:
            rep = _measure(tool, a, None)
            if rep["server_mean_ttft_ms"]:
                # what the client adds to the server's own TTFT: HTTP, SSE and the client's event loop
                rep["client_ttft_overhead_ms"] = rep["mean_ttft_ms"] - rep["server_mean_ttft_ms"]
            if rep["prefix_cache_hits"]:
                print(
                    f"WARNING: {rep['prefix_cache_hits']:.0f} prefix-cache hits during this run: start the "
                    "server with --no-enable-prefix-caching",
                    flush=True,
                )
            runs[tool].append(rep)
            extra = (
                f" server_ttft_ms={rep['server_mean_ttft_ms']:.3f}" if rep.get("server_mean_ttft_ms") else ""
            )
            print(f"run {i + 1} {tool:8s} " + " ".join(f"{k}={rep[k]:.3f}" for k in KEYS) + extra, flush=True)
        pair = [runs[t][-1] for t in ("vllm", "llmdeck")]
        totals = [(r.get("total_input_tokens"), r.get("total_output_tokens")) for r in pair]
        for r in pair:
            r["same_token_totals_as_peer"] = totals[0] == totals[1]
        if totals[0] != totals[1]:
            print(f"WARNING: the tools sent different workloads (input, output tokens): {totals}", flush=True)
        _save(out, _report(a, runs, base_seed))  # every finished pair is kept
    a.seed = base_seed
    report = _report(a, runs, base_seed)
    _save(out, report)
    return _summary(a, out, report)


def _summary(a: argparse.Namespace, out: Path, report: dict[str, Any]) -> int:
    medians, ratios, ok = report["medians"], report["ratios_llmdeck_over_vllm"], report["within_tolerance"]
    if not report["runs_done"]:
        print(f"\nno complete run yet ({out})")
        return 1
    print(f"\nmedian of {report['runs_done']} interleaved runs each ({out}):")
    if report.get("control"):
        print(f"A/A CONTROL: both columns are {report['control']} (the slots keep their names)")
    c = report.get("control")
    heads = (f"{c} (slot 1)", f"{c} (slot 2)") if c else ("vllm bench serve", "llmdeck")
    print(f"{'metric':20s} {heads[0]:>18s} {heads[1]:>12s} {'ratio':>8s}")
    for k in KEYS:
        print(f"{k:20s} {medians['vllm'][k]:18.3f} {medians['llmdeck'][k]:12.3f} {ratios[k]:8.4f}")
    for tool, ms in report["median_client_ttft_overhead_ms"].items():
        print(f"client TTFT overhead over the server's own TTFT, median: {tool} {ms:.3f} ms")
    ref = report["server_referenced"]
    if ref:
        print(
            "referenced to the server's own figures per run, llmdeck / vllm: "
            + " ".join(f"{k}={v:.4f}" for k, v in ref["ratios_llmdeck_over_vllm"].items())
        )
    print(
        "within 3%: "
        + ("yes" if ok else "NO")
        + ("" if report["runs_done"] == a.runs else " (runs not all done)")
    )
    return 0 if ok and report["runs_done"] == a.runs else 1


if __name__ == "__main__":
    sys.exit(main())
