"""A bounded soak of `llmdeck gateway`: C streams kept busy for D seconds; RSS growth and lost requests.

The gateway runs as its own process in front of the fake paced server (or ``--base-url`` of a real
one); the client keeps ``--concurrency`` streamed /v1/completions in flight for ``--seconds`` and
samples the gateway's RSS every 5 s. Reported: requests ok / failed, the RSS after warm-up (the first
sample after 10% of the run) and at the end, and the growth between them.

  python benchmarks/gateway_soak.py --concurrency 64 --seconds 120 --out results/gateway_soak_fake-c64.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_overhead import ROOT, fake_backend, one, spawn

from llmdeck.util.net import free_port


async def soak(url: str, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    body = {
        "model": "bench",
        "prompt": "hello",
        "max_tokens": a.max_tokens,
        "stream": True,
        "ignore_eos": True,
    }
    proc = psutil.Process(pid)
    samples: list[tuple[float, int]] = []
    counts = {"ok": 0, "failed": 0}
    failures: list[dict[str, Any]] = []
    t0 = time.monotonic()
    limits = httpx.Limits(max_connections=a.concurrency * 2, max_keepalive_connections=a.concurrency * 2)
    async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10), limits=limits) as client:

        async def worker() -> None:
            while time.monotonic() - t0 < a.seconds:
                r = await one(client, f"{url}/v1/completions", body, {})
                ok = r["ok"] and r["events"] == a.max_tokens + 1  # the tokens and the usage event
                counts["ok" if ok else "failed"] += 1
                if not ok and len(failures) < 5:
                    failures.append(r)

        async def sampler() -> None:
            while time.monotonic() - t0 < a.seconds:
                samples.append((time.monotonic() - t0, proc.memory_info().rss))
                await asyncio.sleep(5)

        await asyncio.gather(sampler(), *(worker() for _ in range(a.concurrency)))
    samples.append((time.monotonic() - t0, proc.memory_info().rss))
    warm = next(rss for t, rss in samples if t >= a.seconds * 0.1)
    end = samples[-1][1]
    return {
        **counts,
        "failures": failures,
        "rss_warm_mib": warm / 2**20,
        "rss_end_mib": end / 2**20,
        "rss_growth": end / warm - 1,
        "samples": samples,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", help="a running server (default: the fake paced server)")
    p.add_argument("--model", default="tiny-qwen3")
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gw-soak-") as tmpdir:
        tmp = Path(tmpdir)
        if a.base_url:
            result = run(a.base_url.rstrip("/").removesuffix("/v1"), a.model, a, tmp)
        else:
            with fake_backend(a, tmp) as (backend, model):
                result = run(backend, model, a, tmp)
    shown = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(shown, indent=1))
    if a.out:
        params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
        doc = {
            "schema": "llmdeck.gateway_soak/1",
            "params": params,
            "result": result,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        a.out.write_text(json.dumps(doc, indent=1) + "\n")


def run(backend: str, model: str, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    (tmp / "gw.yaml").write_text(f"routes:\n  - model: bench\n    backends: ['{backend}']\n")
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "llmdeck.gateway.serve",
        "--config",
        str(tmp / "gw.yaml"),
        "--port",
        str(port),
    ]
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
        "LLMDECK_STATE_DIR": str(tmp / "state"),
    }
    with spawn(argv, f"http://127.0.0.1:{port}/health", tmp / "gateway.log", env) as pid:
        return asyncio.run(soak(f"http://127.0.0.1:{port}", pid, a))


if __name__ == "__main__":
    main()
