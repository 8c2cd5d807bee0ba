"""`llmdeck restart` while agent-like clients stream through the gateway: how many answers are cut.

Each client sends a streamed completion (400 tokens) through `llmdeck gateway`, reads it to its end, "runs
a tool" (THINK_S), and sends the next; a request is whole when its stream ends with a finish reason and
`[DONE]`. Some seconds in, `llmdeck restart` runs with the --drain given; the clients go on till a few
seconds after it returns. Printed: each request's outcome (whole, cut: the stream ended without its end,
or an HTTP error) and what the restart said.

    python restart_under_load.py GATEWAY_URL SERVER_NAME CLIENTS THINK_S DRAIN_S

LLMDECK (default .venv/bin/llmdeck) is the command that restarts; MAX_TOKENS (default 400) each answer's
length (the GPU run, evidence/device/drain_gpu.sh, asks for more: the H200 writes 400 tokens in ~2 s).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx

URL, NAME, CLIENTS, THINK_S, DRAIN_S = (
    sys.argv[1],
    sys.argv[2],
    int(sys.argv[3]),
    float(sys.argv[4]),
    sys.argv[5],
)
TOKENS = int(os.environ.get("MAX_TOKENS", "400"))
BODY = {"model": "coder", "prompt": "def main():", "max_tokens": TOKENS, "ignore_eos": True, "stream": True}
LLMDECK = shlex.split(os.environ.get("LLMDECK", ".venv/bin/llmdeck"))
outcomes: list[tuple[float, str]] = []
stop = threading.Event()
t0 = time.monotonic()


def one(client: httpx.Client) -> str:
    try:
        with client.stream("POST", f"{URL}/v1/completions", json=BODY) as resp:
            if resp.status_code != 200:
                return f"HTTP {resp.status_code}"
            lines = [x for x in resp.iter_lines() if x]
    except httpx.HTTPError as exc:
        return f"cut ({type(exc).__name__})"
    ended = lines[-1:] == ["data: [DONE]"] and any('"finish_reason":"length"' in x for x in lines)
    return "whole" if ended else "cut (stream ended mid-answer)"


def agent() -> None:
    with httpx.Client(timeout=httpx.Timeout(900, connect=10)) as client:
        while not stop.is_set():
            said = one(client)
            outcomes.append((time.monotonic() - t0, said))  # when it ended
            time.sleep(THINK_S)


threads = [threading.Thread(target=agent) for _ in range(CLIENTS)]
for t in threads:
    t.start()
time.sleep(6)
began = time.monotonic() - t0
said = subprocess.run(
    [*LLMDECK, "restart", NAME, "--drain", DRAIN_S], capture_output=True, text=True, check=False
)
ended = time.monotonic() - t0
time.sleep(6)
stop.set()
for t in threads:
    t.join()
print(
    f"clients {CLIENTS}, think {THINK_S:g} s, restart --drain {DRAIN_S}: ran {began:.1f}-{ended:.1f} s, "
    f"exit {said.returncode}"
)
for line in said.stderr.splitlines():
    if (
        "request(s)" in line
        or "finished" in line
        or "cut by" in line
        or line.startswith(("stopping", "ready"))
    ):
        print("  restart:", line.strip())
during = [o for t, o in outcomes if began <= t <= ended + 1]
print("  requests:", dict(Counter(o for _, o in outcomes)), "| ending while it ran:", dict(Counter(during)))
