"""What requests meet through the gateway while `llmdeck restart NAME` restarts its `server:` backend.

One real CPU vLLM server (the tiny Qwen3 of `make-tiny`, made into .cache/test-tiny if absent) started
with `llmdeck up`, a gateway (`llmdeck gateway up`) whose one route's backend is that server by name, and
a client that sends a short chat request every ``--every-s`` from a few seconds before `llmdeck restart
NAME` till a few seconds after it returned (whether the ones before are answered or not); each request's
status and time are kept. Run with
``--src DIR`` to drive another tree's llmdeck (e.g. ``git archive`` of the commit before a change) in the
same run, for a side-by-side count.

    python benchmarks/gateway_restart_gap.py --out benchmarks/results/gateway_restart_gap.json \
        --src /tmp/old-src --src src

Each ``--src`` gets a fresh state dir, server and gateway, one after the other.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CHAT = {"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _llmdeck(src: Path, env: dict[str, str], *args: str, timeout: float = 600) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "llmdeck", *args],
        env={**env, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise SystemExit(f"llmdeck {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def _one(client: httpx.Client, url: str, t_start: float, out: list[dict[str, Any]]) -> None:
    t0 = time.monotonic()
    try:
        r = client.post(url, json=CHAT)
        code = r.json().get("error", {}).get("code") if r.status_code != 200 else None
        status: int | str = r.status_code
    except (httpx.HTTPError, ValueError) as exc:
        status, code = type(exc).__name__, None
    out.append({"t_s": round(t0 - t_start, 2), "status": status, "code": code,
                "took_s": round(time.monotonic() - t0, 2)})  # fmt: skip


def _client(url: str, stop: threading.Event, every_s: float, out: list[dict[str, Any]]) -> None:
    """A request every ``every_s`` whether the ones before are answered or not (as agents' sessions
    come), each in its own thread; returns when all are answered."""
    t_start, sent = time.monotonic(), []
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=50)
    with httpx.Client(timeout=200, limits=limits) as client:
        while not stop.is_set():
            t = threading.Thread(target=_one, args=(client, url, t_start, out), daemon=True)
            t.start()
            sent.append(t)
            time.sleep(every_s)
        for t in sent:
            t.join(200)


def one_tree(src: Path, model: Path, every_s: float) -> dict[str, Any]:
    """A server, a gateway and the restart under traffic on the llmdeck of ``src``."""
    home = Path(tempfile.mkdtemp(prefix="restart-gap-"))
    env = {**os.environ, "LLMDECK_STATE_DIR": str(home / "state"),
           "LLMDECK_CACHE_DIR": str(ROOT / ".cache" / "engine-cache")}  # fmt: skip
    server_port, gw_port = _free(), _free()
    (home / "gateway.yaml").write_text("routes:\n  - model: a\n    backends: [gap]\n")
    _llmdeck(src, env, "up", "--model", str(model), "--engine", "cpu", "--name", "gap", "--port",
             str(server_port), "--no-watchdog", "--", "--max-model-len", "2048")  # fmt: skip
    try:
        _llmdeck(src, env, "gateway", "up", "--config", str(home / "gateway.yaml"), "--port", str(gw_port))
        try:
            return _under_traffic(src, env, f"http://127.0.0.1:{gw_port}/v1/chat/completions", every_s)
        finally:
            _llmdeck(src, env, "gateway", "down")
    finally:
        _llmdeck(src, env, "down", "gap")


def _under_traffic(src: Path, env: dict[str, str], url: str, every_s: float) -> dict[str, Any]:
    got: list[dict[str, Any]] = []
    stop = threading.Event()
    client = threading.Thread(target=_client, args=(url, stop, every_s, got), daemon=True)
    client.start()
    time.sleep(3.0)
    t0 = time.monotonic()
    _llmdeck(src, env, "restart", "gap")
    restart_s = time.monotonic() - t0
    time.sleep(3.0)
    stop.set()
    client.join(150)
    counts = collections.Counter(f"{r['status']}" + (f" {r['code']}" if r["code"] else "") for r in got)
    return {"restart_s": round(restart_s, 1), "requests": len(got), "outcomes": dict(counts),
            "longest_wait_s": max((r["took_s"] for r in got), default=0.0), "requests_seen": got}  # fmt: skip


def _free() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", action="append", type=Path, required=True, help="an llmdeck src folder")
    p.add_argument("--every-s", type=float, default=0.2)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from llmdeck.model.tiny import is_tiny_model, make_tiny_model

    model = ROOT / ".cache" / "test-tiny"
    if not is_tiny_model(model):
        make_tiny_model(model, force=True)
    runs = []
    for src in args.src:
        result = one_tree(src.resolve(), model, args.every_s)
        print(f"{src}: restart {result['restart_s']} s, {result['requests']} requests: {result['outcomes']}, "
              f"longest {result['longest_wait_s']} s", flush=True)  # fmt: skip
        runs.append({"src": str(src), **result})
    args.out.write_text(json.dumps({"every_s": args.every_s, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
