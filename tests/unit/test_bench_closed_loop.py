"""`bench --duration` without `--request-rate` (a closed loop at the concurrency cap) ends at its duration.

It used to spin: with no rate every arrival offset is 0, the dispatch loop never yielded to the event
loop, so neither the duration nor the cap was ever read and tasks piled up without limit (3.7 GB in 41 s).
The server is a FAKE OpenAI upstream (tests/gateway_fakes.py), not an engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gateway_fakes import FakeOpenAIUpstream, UvicornThread
from repo_paths import ROOT


def test_duration_without_a_rate_ends_and_keeps_the_cap(tmp_path: Path) -> None:
    upstream = FakeOpenAIUpstream()
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"))
    with UvicornThread(upstream.app) as server:
        args = ["--num-prompts", "2", "--input-len", "8", "--output-len", "4", "--duration", "2"]
        args += ["--max-concurrency", "2", "--no-metrics", "--out", str(out), server.url]
        t0 = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-m", "llmdeck", "bench", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=90,
        )
        elapsed = time.monotonic() - t0
    assert res.returncode == 0, res.stderr[-1500:]
    assert elapsed < 60, elapsed  # the old loop never ended (and grew by ~90 MB a second)
    assert "Traceback" not in res.stderr
    sent = len(upstream.bodies)
    assert sent >= 2  # it measured, and within the cap: 2 in flight at most, each a few ms
    assert json.loads(out.read_text())
