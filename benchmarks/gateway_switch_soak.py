"""Scripted model switches under load through `llmdeck gateway` (issue 21): no lost request, within budget.

The gateway runs as `llmdeck gateway up` runs it, with launch specs and a budget that holds one of them.
The schedule asks for model k % n during phase k (``--phase-s`` long); worker i follows it ``i * --skew-s``
seconds late, so around each switch some workers still want the old model while others want the new
one (the old one is drained, then stopped). A thread samples which managed servers are up and
MemAvailable every 0.5 s. Reported: requests by outcome, latency, starts and evictions (from
`/gateway/status`), the most models up at once, and the lowest MemAvailable.

  # the CPU engine: two tiny-model specs made here, a 5 GiB budget (one fits)
  python benchmarks/gateway_switch_soak.py --seconds 240 --out benchmarks/results/gateway_switch_cpu.json
  # any specs (e.g. on the H200): --spec a.json --spec b.json --memory-gib 100
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmdeck.engines.spec import LaunchSpec, read_spec_file  # noqa: E402
from llmdeck.gateway import service as gateway_service  # noqa: E402
from llmdeck.runtime.engine_state import is_alive  # noqa: E402
from llmdeck.runtime.host import read_meminfo  # noqa: E402
from llmdeck.runtime.state import StateStore  # noqa: E402
from llmdeck.settings import Settings  # noqa: E402
from llmdeck.util.net import free_port  # noqa: E402


def tiny_specs(tmp: Path) -> list[Path]:
    from llmdeck.model.tiny import is_tiny_model, make_tiny_model

    model = ROOT / ".cache" / "test-tiny"
    if not is_tiny_model(model):
        make_tiny_model(model, force=True)
    out = []
    for name in ("soak-a", "soak-b"):
        spec = LaunchSpec(
            name=name,
            engine="cpu",
            model=str(model),
            served_model_name=name,
            port=free_port(),
            vllm_args=["--max-model-len", "2048", "--max-num-seqs", "8"],
        )
        path = tmp / f"{name}.json"
        path.write_text(spec.model_dump_json(), encoding="utf-8")
        out.append(path)
    return out


def write_config(tmp: Path, specs: list[Path], a: argparse.Namespace) -> tuple[Path, list[str]]:
    names = [read_spec_file(p).name for p in specs]
    routes = "\n".join(
        f"  - {{model: {n}, backends: [{{spec: {p}}}]}}" for n, p in zip(names, specs, strict=True)
    )
    text = (
        f"routes:\n{routes}\nbudget:\n  memory_gib: {a.memory_gib}\n"
        f"  queue: {{max_waiting: 64, wait_s: {a.wait_s}}}\ntimeouts: {{response_s: 900}}\n"
    )
    path = tmp / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path, names


class Sampler(threading.Thread):
    def __init__(self, settings: Settings, names: list[str]) -> None:
        super().__init__(daemon=True)
        self.store, self.names = StateStore(settings.servers_dir), set(names)
        self.most_up, self.min_available, self.halt = 0, None, threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            up = sum(1 for r in self.store.list() if r.name in self.names and is_alive(r))
            self.most_up = max(self.most_up, up)
            avail = read_meminfo().available
            self.min_available = avail if self.min_available is None else min(self.min_available, avail)
            time.sleep(0.5)


def worker(url: str, names: list[str], i: int, t0: float, a: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    with httpx.Client(timeout=a.wait_s + 300) as client:
        while (now := time.monotonic() - t0) < a.seconds:
            model = names[int(max(0.0, now - i * a.skew_s) // a.phase_s) % len(names)]
            body = {"model": model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 16}
            start = time.monotonic()
            try:
                resp = client.post(f"{url}/v1/chat/completions", json=body)
                outcome = str(resp.status_code)
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            out.append({"model": model, "outcome": outcome, "s": time.monotonic() - start, "at": now})
    return out


def run(a: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="switch-soak-"))
    specs = [Path(p).resolve() for p in a.spec] or tiny_specs(tmp)
    config, names = write_config(tmp, specs, a)
    settings = Settings(state_dir=tmp / "state", cache_dir=ROOT / ".cache" / "engine-cache")
    sampler = Sampler(settings, names)
    record = gateway_service.start_background(config, "127.0.0.1", free_port(), settings, insecure=False)
    sampler.start()
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(a.concurrency) as pool:
            results = [
                r
                for f in [pool.submit(worker, record.base_url, names, i, t0, a) for i in range(a.concurrency)]
                for r in f.result()
            ]
        status = httpx.get(record.base_url + "/gateway/status", timeout=10).json()
    finally:
        sampler.halt.set()
        gateway_service.stop(settings)
    return summarize(results, status, sampler, a, time.monotonic() - t0, record.log_path)


def summarize(
    results: list[dict[str, Any]],
    status: dict[str, Any],
    sampler: Sampler,
    a: argparse.Namespace,
    wall_s: float,
    log: Path,
) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for r in results:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    lat = sorted(r["s"] for r in results)
    return {
        "args": vars(a),
        "wall_s": round(wall_s, 1),
        "requests": len(results),
        "outcomes": outcomes,
        "lost": len(results) - outcomes.get("200", 0),
        "latency_s": {"p50": round(statistics.median(lat), 2), "max": round(lat[-1], 2)} if lat else {},
        "models": {
            m["model"]: {k: m[k] for k in ("starts", "evictions", "measured_gib", "planned_gib")}
            for m in status["models"]
        },
        "most_models_up_at_once": sampler.most_up,
        "min_mem_available_gib": round((sampler.min_available or 0) / (1 << 30), 2),
        "gateway_log": str(log),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--spec", action="append", default=[], help="A launch spec (repeat); default: 2 tiny CPU specs."
    )
    p.add_argument("--memory-gib", type=float, default=5.0, help="The budget (default 5: one tiny model).")
    p.add_argument("--seconds", type=float, default=240.0)
    p.add_argument("--phase-s", type=float, default=60.0, help="How long the schedule stays on one model.")
    p.add_argument("--skew-s", type=float, default=1.0, help="Worker i follows the schedule i * this late.")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--wait-s", type=float, default=900.0, help="budget.queue.wait_s.")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: still stop the gateway (finally)
    result = run(a)
    text = json.dumps(result, indent=2, default=str)
    if a.out:
        a.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
