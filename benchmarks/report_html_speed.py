"""Size and speed of the HTML report on a 2,000-request result (the CPU engine's, committed gzipped
as evidence/report/results/big-2000.json.gz by evidence/report/cpu_big.sh).

Measures, --runs times each: the whole command as a user runs it (`llmdeck report BIG --html OUT`,
a fresh process: Python, imports, load, render, write) and the render alone in this process (after
one warm-up render: matplotlib's font cache). Prints and writes results/report_html_speed.json.

    PYTHONPATH=src python benchmarks/report_html_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIG = ROOT / "evidence" / "report" / "results" / "big-2000.json.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "report_html_speed.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from llmdeck.bench.html.page import render_html
    from llmdeck.bench.result_file import load_result

    tmp = Path(tempfile.mkdtemp())
    try:
        src = tmp / "big-2000.json"
        src.write_bytes(gzip.decompress(BIG.read_bytes()))
        result = load_result(src)
        n_req = sum(len(s.requests) for s in result.scenarios)
        render_html([result], [str(src)])  # warm-up
        render_s = []
        for _ in range(args.runs):
            t = time.perf_counter()
            html = render_html([result], [str(src)])
            render_s.append(time.perf_counter() - t)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        llmdeck = shutil.which("llmdeck") or "llmdeck"
        cli_s = []
        for k in range(args.runs):
            t = time.perf_counter()
            subprocess.run(
                [llmdeck, "report", str(src), "--html", str(tmp / f"o{k}.html")],
                env=env,
                check=True,
                capture_output=True,
            )
            cli_s.append(time.perf_counter() - t)
        page_bytes = (tmp / "o0.html").stat().st_size
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {
        "benchmark": "report_html_speed",
        "date": datetime.now(UTC).isoformat(),
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "result": str(BIG.relative_to(ROOT)),
        "requests": n_req,
        "itl_samples": sum(len(r.itl) for s in result.scenarios for r in s.requests),
        "page_bytes": page_bytes,
        "render_s": render_s,
        "render_s_median": statistics.median(render_s),
        "cli_s": cli_s,
        "cli_s_median": statistics.median(cli_s),
        "html_chars": len(html),
        "limits": {"page_bytes": 3 * 1024 * 1024, "seconds": 2.0},
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"{n_req} requests: page {page_bytes / 1024:.0f} kB; render {out['render_s_median']:.2f} s "
        f"(median of {args.runs}); `llmdeck report --html` end to end {out['cli_s_median']:.2f} s"
    )


if __name__ == "__main__":
    main()
