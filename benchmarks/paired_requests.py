"""Request-by-request comparison of the two tools in a block-interleaved agreement result.

In each block pair of ``agreement_cpu.py --blocks K`` both tools send the same prompts at the same
send times, and since session 5 each block keeps every request's TTFT in the dataset's order
(``ttfts_ms``). Request i of vLLM's block and request i of llmdeck's block are then the same request,
sent twice, a minute apart: their difference is what the client adds plus how differently the server
served it the second time. This script shows which of the two moves a block's mean:

- ``mean_d_ms``: the block's mean paired difference, vLLM minus llmdeck (= the difference of the two
  blocks' mean TTFTs), next to ``server_d_ms``, the same difference in the server's own mean TTFT;
- ``median_d_ms``: the typical request's difference (robust to the server's slow episodes);
- ``big``: requests whose two TTFTs differ by more than --big ms, and ``longest_run``: the longest run
  of consecutive such requests with the same sign (a slow episode of the server lasting that many
  seconds at 1 req/s, rather than isolated outliers).

  python benchmarks/paired_requests.py benchmarks/results/agreement_h200-1rps-v9.json
  python benchmarks/paired_requests.py --json out.json benchmarks/results/agreement_h200-*-v9.json
  python benchmarks/paired_requests.py --pool benchmarks/results/agreement_h200-1rps-v{9,10}.json

``pooled`` (per file, and over all files with --pool) treats every paired request as one sample per
tool: the two mean TTFTs and their ratio, and in how many block pairs the server itself was slower
during llmdeck's block.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _longest_run(d: list[float], big: float) -> int:
    best = cur = 0
    sign = 0
    for x in d:
        s = (x > big) - (x < -big)
        cur = cur + 1 if s and s == sign else (1 if s else 0)
        sign = s
        best = max(best, cur)
    return best


def pair_view(pair: dict[str, Any], big: float = 25.0) -> dict[str, Any] | None:
    """One block pair, request by request; None when a block lacks per-request TTFTs."""
    tv, tl = pair["vllm"].get("ttfts_ms"), pair["llmdeck"].get("ttfts_ms")
    if not tv or not tl or len(tv) != len(tl):
        return None
    d = [a - b for a, b in zip(tv, tl, strict=True) if a is not None and b is not None]
    sv, sl = pair["vllm"].get("server_mean_ttft_ms"), pair["llmdeck"].get("server_mean_ttft_ms")
    return {
        "index": pair["index"],
        "order": pair["order"],
        "n": len(d),
        "mean_d_ms": statistics.fmean(d),
        "server_d_ms": sv - sl if sv is not None and sl is not None else None,
        "server_mean_ttft_ms": {"vllm": sv, "llmdeck": sl},
        "median_d_ms": statistics.median(d),
        "big": sum(abs(x) > big for x in d),
        "longest_run": _longest_run(d, big),
    }


def analyse(report: dict[str, Any], big: float = 25.0) -> dict[str, Any]:
    pairs = [p for p in (pair_view(pr, big) for pr in report.get("block_pairs") or []) if p]
    client = [p["mean_d_ms"] - p["server_d_ms"] for p in pairs if p["server_d_ms"] is not None]
    return {
        "label": report.get("label"),
        "big_ms": big,
        "pairs": pairs,
        # what is left of each block's difference once the server's own difference is taken out:
        # the clients' difference in what they add to TTFT
        "client_d_ms": {
            "median": statistics.median(client) if client else None,
            "min": min(client, default=None),
            "max": max(client, default=None),
        },
        "median_of_median_d_ms": statistics.median(p["median_d_ms"] for p in pairs) if pairs else None,
        "pooled": pooled([report]),
    }


def pooled(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Every paired request of every block pair in ``reports``, as one sample per tool: the mean
    TTFT each tool measured over all of them and its ratio, and in how many block pairs the server
    itself was slower during llmdeck's block than during vLLM's (a client that slowed the server
    would show up as most of them; chance as about half)."""
    tv: list[float] = []
    tl: list[float] = []
    slower = counted = 0
    for rep in reports:
        for pr in rep.get("block_pairs") or []:
            a, b = pr["vllm"].get("ttfts_ms"), pr["llmdeck"].get("ttfts_ms")
            if not a or not b or len(a) != len(b):
                continue
            for x, y in zip(a, b, strict=True):
                if x is not None and y is not None:
                    tv.append(x)
                    tl.append(y)
            sv, sl = pr["vllm"].get("server_mean_ttft_ms"), pr["llmdeck"].get("server_mean_ttft_ms")
            if sv is not None and sl is not None:
                counted += 1
                slower += sl > sv
    if not tv:
        return None
    mv, ml = statistics.fmean(tv), statistics.fmean(tl)
    return {
        "requests": len(tv),
        "mean_ttft_ms": {"vllm": mv, "llmdeck": ml},
        "ratio": ml / mv,
        "pairs_server_slower_for_llmdeck": slower,
        "pairs_with_server_figures": counted,
    }


def _print(a: dict[str, Any]) -> None:
    print(f"\n{a['label']}: vLLM minus llmdeck, per request (same prompt, same send time)")
    head = ("pair", 4), ("order", 16), ("n", 4), ("mean_d", 8), ("server_d", 9), ("median_d", 9), ("big", 4)
    print(" ".join(f"{h:>{w}}" for h, w in head) + f" {'run':>4}")
    for p in a["pairs"]:
        sd = f"{p['server_d_ms']:9.1f}" if p["server_d_ms"] is not None else f"{'-':>9}"
        order = "/".join(t[:4] for t in p["order"])
        print(
            f"{p['index']:4d} {order:>16} {p['n']:4d} {p['mean_d_ms']:8.1f} {sd} {p['median_d_ms']:9.1f} "
            f"{p['big']:4d} {p['longest_run']:4d}"
        )
    c = a["client_d_ms"]
    if c["median"] is not None:
        rng = f"{c['min']:.2f} .. {c['max']:.2f}"
        print(f"client part (mean_d - server_d): median {c['median']:.2f} ms, range {rng} ms")
    _print_pooled("pooled", a["pooled"])


def _print_pooled(name: str, po: dict[str, Any] | None) -> None:
    if po is None:
        return
    m = po["mean_ttft_ms"]
    print(
        f"{name}: {po['requests']} requests each, mean TTFT vllm {m['vllm']:.2f} ms, llmdeck "
        f"{m['llmdeck']:.2f} ms, ratio {po['ratio']:.4f}; server slower in llmdeck's block in "
        f"{po['pairs_server_slower_for_llmdeck']} of {po['pairs_with_server_figures']} pairs"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--big", type=float, default=25.0, help="ms: a request difference counted as big")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--pool", action="store_true", help="also pool every paired request of all the files (same workload)"
    )
    a = p.parse_args()
    out = []
    reports = []
    for f in a.files:
        rep = json.loads(f.read_text())
        reports.append(rep)
        res = analyse(rep, a.big)
        res["file"] = f.name
        out.append(res)
        _print(res)
    result: Any = out
    if a.pool:
        all_files = pooled(reports)
        print()
        _print_pooled("all files pooled", all_files)
        result = {"files": out, "pooled": all_files}
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
