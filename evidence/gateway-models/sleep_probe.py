"""Issue 21's sleep-mode measurement on a GPU: what each sleep level frees and how fast the model wakes.

Against a running vLLM server started with ``--enable-sleep-mode`` and ``VLLM_SERVER_DEV_MODE=1``:
for level 1 then level 2 — GPU memory used (NVML, the whole device and the server's processes) before,
asleep and awake; seconds to sleep and to wake (level 2: ``/wake_up`` then ``/collective_rpc
reload_weights`` and ``/reset_prefix_cache``, as the gateway does); and the time to first token of
the first request after the wake, next to a request on the warm server before. One JSON object out.

    python evidence/gateway-models/sleep_probe.py http://127.0.0.1:8000 MODEL_NAME PID > sleep.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import httpx

GIB = 1 << 30


def gpu_used(pid: int) -> dict[str, float]:
    """The device's used memory, the server's process tree's GPU memory and RSS (GPU 0), read the way
    the gateway measures a footprint (llmdeck.gateway.footprint, llmdeck.runtime.host's NVML snapshot)."""
    import psutil

    from llmdeck.gateway.footprint import process_tree, tree_gpu_bytes
    from llmdeck.runtime.host import nvml_snapshot

    tree = process_tree(pid)
    gpu0 = next(g for g in nvml_snapshot().gpus if g.index == 0)
    host = sum(psutil.Process(p).memory_info().rss for p in tree if psutil.pid_exists(p))
    return {
        "device_used_gib": (gpu0.used_bytes or 0) / GIB,
        "server_gpu_gib": (tree_gpu_bytes(tree, 0) or 0) / GIB,
        "server_rss_gib": host / GIB,
    }


def ttft(url: str, model: str) -> float:
    body = {"model": model, "prompt": "Say hello.", "max_tokens": 8, "stream": True, "temperature": 0}
    t0 = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=600) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                return time.perf_counter() - t0
    raise RuntimeError("no token came back")


def post(url: str, path: str, body: dict[str, Any] | None = None) -> float:
    t0 = time.perf_counter()
    httpx.post(url + path, json=body, timeout=600).raise_for_status()
    return time.perf_counter() - t0


def cycle(url: str, model: str, pid: int, level: int) -> dict[str, Any]:
    out: dict[str, Any] = {"level": level, "ttft_warm_s": ttft(url, model), "awake": gpu_used(pid)}
    out["sleep_s"] = post(url, f"/sleep?level={level}")
    out["is_sleeping"] = httpx.get(url + "/is_sleeping", timeout=30).json()
    out["asleep"] = gpu_used(pid)
    wake = post(url, "/wake_up")
    if level == 2:
        try:
            out["reload_s"] = post(url, "/collective_rpc", {"method": "reload_weights"})
        except httpx.HTTPStatusError as exc:  # vLLM 0.22: "Model reloading with `dummy` format" is
            out["reload_error"] = exc.response.text[:300]  # not implemented (random weights)
        wake += post(url, "/reset_prefix_cache")
    out["wake_s"] = wake
    out["ttft_first_after_wake_s"] = ttft(url, model)
    out["woken"] = gpu_used(pid)
    out["freed_device_gib"] = out["awake"]["device_used_gib"] - out["asleep"]["device_used_gib"]
    return out


def main() -> None:
    url, model, pid = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3])
    result: dict[str, Any] = {"url": url, "model": model, "cycles": []}
    try:
        for level in (1, 2):
            result["cycles"].append(cycle(url, model, pid, level))
    finally:  # what was measured is kept when a later step fails
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
