"""Client CPU seconds per 1,000 streamed chunks: llmdeck vs `vllm bench serve`, same server.

Each tool runs in its own child process (interleaved, ``--runs`` each); the CPU time of the
load phase (``time.process_time()``: user + system of every thread of the client process) is
divided by the output chunks received. Whole-process CPU (imports, tokenizer, prompt building)
is reported beside it. Acceptance: llmdeck's phase cost per 1,000 chunks is not higher.

  python benchmarks/client_cost.py                                      # CPU dev server
  python benchmarks/client_cost.py --base-url http://127.0.0.1:8000 --model qwen3-0.6b \\
      --tokenizer /root/models/qwen3-0.6b --max-concurrency 16 --num-prompts 160 --output-len 256
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import ROOT, add_workload_args, run_child


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_args(p)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--label", default="cpu")
    p.add_argument("--out", type=Path, default=None)
    p.set_defaults(input_len=32, output_len=256, num_prompts=16, max_concurrency=8)
    a = p.parse_args()
    out = a.out or ROOT / "benchmarks" / "results" / f"client_cost_{a.label}.json"
    tools = [("vllm", False), ("llmdeck", False), ("llmdeck", True)]
    runs: dict[str, list[dict[str, float]]] = {}
    for i in range(a.runs):
        for tool, no_metrics in tools:
            rep = run_child(tool, a, no_metrics=no_metrics)
            rep["phase_cpu_s_per_1k_chunks"] = 1000 * rep["phase_cpu_s"] / max(rep["chunks"], 1)
            rep["process_cpu_s_per_1k_chunks"] = 1000 * rep["process_cpu_s"] / max(rep["chunks"], 1)
            name = str(rep["tool"])
            runs.setdefault(name, []).append(rep)
            print(
                f"run {i + 1} {name:38s} chunks={rep['chunks']:6.0f} phase_cpu={rep['phase_cpu_s']:.3f}s "
                f"per1k={rep['phase_cpu_s_per_1k_chunks']:.4f}s process_cpu={rep['process_cpu_s']:.2f}s",
                flush=True,
            )
    summary = {
        name: {
            "median_phase_cpu_s_per_1k_chunks": statistics.median(r["phase_cpu_s_per_1k_chunks"] for r in rs),
            "median_process_cpu_s_per_1k_chunks": statistics.median(
                r["process_cpu_s_per_1k_chunks"] for r in rs
            ),
            "median_chunks": statistics.median(r["chunks"] for r in rs),
        }
        for name, rs in runs.items()
    }
    v = summary["vllm bench serve"]["median_phase_cpu_s_per_1k_chunks"]
    ld = summary["llmdeck"]["median_phase_cpu_s_per_1k_chunks"]
    report = {
        "benchmark": "client_cost",
        "label": a.label,
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
        },
        "runs": runs,
        "summary": summary,
        "llmdeck_over_vllm_phase_cost": ld / v,
        "llmdeck_not_higher": ld <= v,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nclient CPU s per 1,000 chunks, median of {a.runs} ({out}):")
    for name, s in summary.items():
        print(
            f"  {name:38s} load phase {s['median_phase_cpu_s_per_1k_chunks']:.4f}   "
            f"whole process {s['median_process_cpu_s_per_1k_chunks']:.3f}"
        )
    print(f"llmdeck / vllm (load phase): {ld / v:.3f} -> " + ("not higher" if ld <= v else "HIGHER"))
    return 0 if ld <= v else 1


if __name__ == "__main__":
    sys.exit(main())
