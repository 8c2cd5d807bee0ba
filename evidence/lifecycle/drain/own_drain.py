"""`llmdeck down --drain 0` of a server started with vLLM's own drain (`-- --shutdown-timeout 60`), one long
answer streaming: is the answer whole, and how long does the stop take?

vLLM (0.22 and later) lets running requests finish for `--shutdown-timeout` seconds after SIGTERM; llmdeck's
stop killed the engine 20 s after its SIGTERM whatever the flag said. `--drain 0` leaves llmdeck's own wait
out, so only vLLM's drain is measured. The answer is ~30 s long on the CPU engine (3,000 tokens, ignore_eos).

    python own_drain.py MODEL_DIR PORT      # LLMDECK: the command (default .venv/bin/llmdeck)

ENGINE (default `--engine cpu`) and VLLM_EXTRA (more vLLM flags) run it elsewhere: the GPU run
(evidence/device/drain_gpu.sh) serves dummy weights with `--engine venv` on vLLM 0.22.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time

import httpx

MODEL, PORT = sys.argv[1], int(sys.argv[2])
LLMDECK = shlex.split(os.environ.get("LLMDECK", ".venv/bin/llmdeck"))
TOKENS = int(os.environ.get("MAX_TOKENS", "3000"))
NAME = "own-drain"
result: dict[str, object] = {}


def stream() -> None:
    body = {
        "model": "tiny",
        "prompt": "def main():",
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    t0 = time.monotonic()
    lines: list[str] = []
    try:
        with httpx.stream("POST", f"http://127.0.0.1:{PORT}/v1/completions", json=body, timeout=300) as resp:
            lines.extend(x for x in resp.iter_lines() if x)
    except httpx.HTTPError as exc:
        result["error"] = type(exc).__name__
    result["chunks"] = sum(1 for x in lines if x.startswith("data: {"))
    result["whole"] = lines[-1:] == ["data: [DONE]"] and any('"finish_reason":"length"' in x for x in lines)
    result["stream_s"] = round(time.monotonic() - t0, 1)


def main() -> None:
    engine = shlex.split(os.environ.get("ENGINE", "--engine cpu"))
    up = [*LLMDECK, "up", "--name", NAME, *engine, "--model", MODEL, "--served-model-name", "tiny"]
    up += ["--port", str(PORT), "--", "--max-model-len", "4096", "--shutdown-timeout", "60"]
    up += shlex.split(os.environ.get("VLLM_EXTRA", ""))
    subprocess.run(up, check=True, capture_output=True, timeout=600)
    client = threading.Thread(target=stream)
    client.start()
    time.sleep(4)  # the answer is running
    t0 = time.monotonic()
    down = subprocess.run(
        [*LLMDECK, "down", NAME, "--drain", "0"], capture_output=True, text=True, timeout=300
    )
    down_s = time.monotonic() - t0
    client.join(timeout=300)
    print(f"down --drain 0: {down.stdout.strip()!r} in {down_s:.1f} s (exit {down.returncode})")
    print(
        f"the answer: whole={result.get('whole')} chunks={result.get('chunks')} of {TOKENS}, "
        f"stream {result.get('stream_s')} s, error={result.get('error')}"
    )


if __name__ == "__main__":
    main()
