"""Agreement with the engine's run-to-run variation divided out, from committed agreement results.

Each run of ``agreement_cpu.py`` records, besides what the tool measured, the server's own mean TTFT
and ITL over that run (deltas of vLLM's ``vllm:time_to_first_token_seconds`` and
``vllm:inter_token_latency_seconds`` histograms). The engine's speed moves between runs (same prompts,
same send times, yet the server's own mean TTFT differs by up to 15% within a pair on the H200), and
that moves both tools' raw medians. Dividing each run's client figure by the server's own figure for
that same run leaves what the tool adds or loses in measuring; comparing those between the tools asks
"do they measure the same thing?" without asking "was the engine equally fast in both runs?".

  python benchmarks/server_referenced.py benchmarks/results/agreement_h200-*-v7.json
  python benchmarks/server_referenced.py --json out.json benchmarks/results/agreement_*.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

# client metric -> the server's own metric it is referenced to
PAIRS = {
    "mean_ttft_ms": "server_mean_ttft_ms",
    "mean_tpot_ms": "server_mean_itl_ms",
    "mean_itl_ms": "server_mean_itl_ms",
}
RAW = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")


def referenced(report: dict[str, Any]) -> dict[str, Any] | None:
    """Median over runs of (client figure / server's own figure), per tool, and llmdeck / vLLM.

    None when the runs do not carry the server's figures (older files, a server without /metrics) or
    when the runs were side by side (the server's counters then mix both tools' requests)."""
    runs = report.get("runs") or {}
    if not all(runs.get(t) for t in ("vllm", "llmdeck")):
        return None
    if any(r.get("side_by_side") for rs in runs.values() for r in rs):
        return None
    out: dict[str, Any] = {"per_tool": {}, "ratios_llmdeck_over_vllm": {}}
    for metric, ref in PAIRS.items():
        med = {}
        for tool in ("vllm", "llmdeck"):
            vals = [r[metric] / r[ref] for r in runs[tool] if r.get(ref)]
            if len(vals) != len(runs[tool]):
                return None
            med[tool] = statistics.median(vals)
        out["per_tool"][metric] = med
        out["ratios_llmdeck_over_vllm"][metric] = med["llmdeck"] / med["vllm"]
    return out


def per_pair_ratios(report: dict[str, Any]) -> dict[str, list[float]]:
    runs = report["runs"]
    n = min(len(runs["vllm"]), len(runs["llmdeck"]))
    return {k: [runs["llmdeck"][i][k] / runs["vllm"][i][k] for i in range(n)] for k in RAW}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--json", type=Path, default=None, help="write the table as JSON here")
    a = p.parse_args()
    rows = []
    heads = ("raw TTFT", "TPOT", "ITL", "tok/s", "| ref TTFT", "TPOT", "ITL")
    print(f"{'result':34s} " + " ".join(f"{h:>9s}" for h in heads))
    for f in a.files:
        rep = json.loads(f.read_text())
        raw = rep.get("ratios_llmdeck_over_vllm") or {}
        ref = referenced(rep)
        row = {"file": f.name, "raw": raw, "server_referenced": ref and ref["ratios_llmdeck_over_vllm"]}
        if ref is not None:
            row["per_tool"] = ref["per_tool"]
            row["per_pair_raw"] = per_pair_ratios(rep)
        rows.append(row)
        r = [raw.get(k) for k in RAW]
        s = [ref["ratios_llmdeck_over_vllm"][k] for k in PAIRS] if ref else [None] * 3
        cells = [f"{v:9.3f}" if v is not None else "        -" for v in r + s]
        print(f"{f.name[:34]:34s} " + " ".join(cells[:4]) + " |" + " ".join(cells[4:]))
    if a.json:
        tmp = a.json.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, indent=2) + "\n")
        tmp.replace(a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
