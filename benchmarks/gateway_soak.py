"""A bounded soak of `llmdeck gateway`: C streams kept busy for D seconds; RSS growth and lost requests.

The gateway runs as its own process in front of the fake paced server (or ``--base-url`` of a real
one; ``--direct`` leaves the gateway out); the client keeps ``--concurrency`` streamed /v1/completions
in flight for ``--seconds`` (each asks for ``stream_options.include_usage``, so the token count is exact
however the server merges events) and every 5 s samples the gateway's RSS and how many streams are in
flight: at the client, at the gateway (its /metrics ``llmdeck_gateway_in_flight``) and at the server
(``vllm:num_requests_running`` from the backend's /metrics; the fake server reports the same name).
Reported: per outcome counts with up to 5 samples each (ok, http_status, cut before [DONE], no_finish,
short: benchmarks/_stream.py), the completion-token distribution, the in-flight samples with their
medians, the client's and the gateway's CPU seconds, the RSS after warm-up (the first sample after 10%
of the run) and at the end, and the growth between them.

The client is one Python process. Its default transport is llmdeck's LeanTransport (``--client lean``):
with httpx's default stack (``--client httpx``) 256 streams cost that process 24.5 ms CPU per request
(9 ms at 32 streams) against 1.6 ms, so it saturated one core at ~25 requests/s here (~42 on the H200)
and the server saw convoys (256 running, then ~60 for seconds) instead of 256 streams: 69% of that CPU
is httpcore 1.0.9's pool bookkeeping, O(connections²) per request (encode/httpcore#1035).

  python benchmarks/gateway_soak.py --concurrency 64 --seconds 120 --out results/gateway_soak_fake-c64.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stream import OUTCOMES, one
from gateway_overhead import ROOT, cpu_seconds, fake_backend, spawn

from llmdeck.client.transport import LeanTransport
from llmdeck.util.net import free_port

SAMPLE_EVERY_S = 5.0  # RSS and in-flight samples
RUNNING = re.compile(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)
GW_IN_FLIGHT = re.compile(r"^llmdeck_gateway_in_flight(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)


class Load:
    """The soak's tallies: outcomes with a few samples each, completion tokens, in-flight samples."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.samples: dict[str, list[dict[str, Any]]] = {o: [] for o in OUTCOMES if o != "ok"}
        self.tokens: Counter[str] = Counter()
        self.inflight = [0]  # streams on their way at the client
        self.concurrency: list[dict[str, Any]] = []

    def add(self, r: dict[str, Any]) -> None:
        self.counts[r["outcome"]] += 1
        self.tokens[str(r.get("completion_tokens"))] += 1
        kept = self.samples.get(r["outcome"])
        if kept is not None and len(kept) < 5:
            kept.append(r)


async def gauge(client: httpx.AsyncClient, base: str | None, pattern: re.Pattern[str]) -> float | None:
    """A gauge from ``base``'s /metrics, summed over its label sets (None: no base, no answer, no gauge)."""
    if base is None:
        return None
    try:
        text = (await client.get(f"{base}/metrics", timeout=5)).text
    except httpx.HTTPError:
        return None
    values = [float(m.group(1)) for m in pattern.finditer(text)]
    return sum(values) if values else None


async def soak(url: str, pid: int | None, backend: str | None, a: argparse.Namespace) -> dict[str, Any]:
    body = {
        "model": a.model if a.direct else "bench",
        "prompt": "hello",
        "max_tokens": a.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},  # exact token counts, however vLLM merges events
        "ignore_eos": True,
    }
    proc = psutil.Process(pid) if pid else None
    samples: list[tuple[float, int]] = []
    load = Load()
    cpu0, gw_cpu0 = time.process_time(), cpu_seconds(pid) if pid else 0.0
    t0 = time.monotonic()
    limits = httpx.Limits(max_connections=a.concurrency * 2, max_keepalive_connections=a.concurrency * 2)
    transport = LeanTransport() if a.client == "lean" else None
    async with (
        httpx.AsyncClient(
            timeout=httpx.Timeout(120, connect=10), limits=limits, transport=transport
        ) as client,
        httpx.AsyncClient(timeout=5, trust_env=False) as probe,
    ):

        async def worker() -> None:
            while time.monotonic() - t0 < a.seconds:
                load.add(await one(client, f"{url}/v1/completions", body, {}, inflight=load.inflight))

        async def sampler() -> None:
            while time.monotonic() - t0 < a.seconds:
                t = time.monotonic() - t0
                if proc is not None:
                    samples.append((t, proc.memory_info().rss))
                load.concurrency.append(
                    {
                        "t": round(t, 1),
                        "client": load.inflight[0],
                        "gateway": await gauge(probe, None if a.direct else url, GW_IN_FLIGHT),
                        "server": await gauge(probe, backend, RUNNING),
                    }
                )
                await asyncio.sleep(SAMPLE_EVERY_S)

        await asyncio.gather(sampler(), *(worker() for _ in range(a.concurrency)))
    out = summarize(load, samples, proc, a, time.monotonic() - t0)
    out["client_cpu_s"] = time.process_time() - cpu0  # the load client's own CPU (one process)
    out["gateway_cpu_s"] = cpu_seconds(pid) - gw_cpu0 if pid else None
    return out


def summarize(
    load: Load,
    samples: list[tuple[float, int]],
    proc: psutil.Process | None,
    a: argparse.Namespace,
    wall: float,
) -> dict[str, Any]:
    ok = load.counts["ok"]
    out: dict[str, Any] = {
        "ok": ok,
        "failed": sum(load.counts.values()) - ok,
        "outcomes": load.counts,
        "failure_samples": load.samples,
        "completion_tokens": dict(load.tokens),
        "requests_per_s": sum(load.counts.values()) / wall,
        "concurrency": load.concurrency,
    }
    busy = [c for c in load.concurrency if c["t"] >= a.seconds * 0.1]
    for side in ("client", "gateway", "server"):
        vals = [c[side] for c in busy if c[side] is not None]
        if vals:
            out[f"{side}_in_flight_median"] = statistics.median(vals)
            out[f"{side}_in_flight_min"] = min(vals)
    if proc is not None:
        samples.append((wall, proc.memory_info().rss))
        warm = next(rss for t, rss in samples if t >= a.seconds * 0.1)
        end = samples[-1][1]
        out.update(rss_warm_mib=warm / 2**20, rss_end_mib=end / 2**20, rss_growth=end / warm - 1)
        out["samples"] = samples
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", help="a running server (default: the fake paced server)")
    p.add_argument("--model", default="tiny-qwen3")
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--direct", action="store_true", help="no gateway: the client talks to the backend")
    p.add_argument(
        "--client",
        choices=["httpx", "lean"],
        default="lean",
        help="the load client's transport: llmdeck's LeanTransport, or httpx's default (CPU-bound at 256)",
    )
    p.add_argument("--stats-every", type=float, default=0.0, help="fake backend: print its stream count")
    p.add_argument("--fake-log", help="fake backend: keep its log (the stream counts) here")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gw-soak-") as tmpdir:
        tmp = Path(tmpdir)
        if a.base_url:
            result = run(a.base_url.rstrip("/").removesuffix("/v1"), a.model, a, tmp)
        else:
            with fake_backend(a, tmp) as (backend, model):
                result = run(backend, model, a, tmp)
    shown = {k: v for k, v in result.items() if k not in ("samples", "concurrency")}
    print(json.dumps(shown, indent=1))
    if a.out:
        params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
        doc = {
            "schema": "llmdeck.gateway_soak/2",
            "params": params,
            "result": result,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        a.out.write_text(json.dumps(doc, indent=1) + "\n")


def run(backend: str, model: str, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    a.model = model
    if a.direct:
        return asyncio.run(soak(backend, None, backend, a))
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
        return asyncio.run(soak(f"http://127.0.0.1:{port}", pid, backend, a))


if __name__ == "__main__":
    main()
