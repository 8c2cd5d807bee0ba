"""A promise kept: Ctrl-C during `bench` says "the partial result … is in FILE" — and FILE is there,
written atomically, readable by `report`, whenever the Ctrl-C comes (here: while the tokenizer
loads, before any request; the case of finished requests is in test_bench_faults.py).

A real `llmdeck bench` process gets a real SIGINT; the server is test_bench_faults' named fake
(FakeSlowSSEServer, a streaming OpenAI-ish server), the tokenizer the tiny model's real one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from security_helpers import cli_env, llmdeck_cmd, run_llmdeck
from test_bench_faults import FakeSlowSSEServer


def _stderr_reader(proc: subprocess.Popen[str], lines: list[str]) -> threading.Thread:
    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _bench(
    args: list[str], tmp_path: Path, lines: list[str]
) -> tuple[subprocess.Popen[str], threading.Thread]:
    """A real `llmdeck bench` process, its stderr read into ``lines``."""
    cli = subprocess.Popen(
        llmdeck_cmd(*args), env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return cli, _stderr_reader(cli, lines)


def test_ctrl_c_while_loading_the_tokenizer_writes_the_promised_file(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    srv = FakeSlowSSEServer(tmp_path, chunks=20, delay=0.05)
    out = tmp_path / "r.json"
    args = ["bench", srv.url, "--out", str(out), "--tokenizer", str(tiny_model_dir), "--num-prompts", "4"]
    lines: list[str] = []
    try:
        cli, reader = _bench(args, tmp_path, lines)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("loading tokenizer" in line for line in lines):
            time.sleep(0.05)
        assert any("loading tokenizer" in line for line in lines), "".join(lines)
        cli.send_signal(signal.SIGINT)
        cli.wait(timeout=60)
        reader.join(5)
    finally:
        srv.kill()
    stderr = "".join(lines)
    assert cli.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert f"is in {out}" in stderr.replace("\n", "")
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted"
    assert [s["status"] for s in data["scenarios"]] == ["skipped"]
    assert "interrupted" in data["scenarios"][0]["skip_reason"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.json.")]  # no temp file left
    report = run_llmdeck(tmp_path, "report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["status"] == "interrupted"


def test_the_message_claims_a_file_only_when_there_is_one(tmp_path: Path) -> None:
    from llmdeck.bench.outcome import interrupted_error

    missing = interrupted_error(tmp_path / "none.json")
    assert "was not written" in missing.message and missing.exit_code == 130
    there = tmp_path / "r.json"
    there.write_text("{}")
    assert f"is in {there}" in interrupted_error(there).message
    kept = interrupted_error(there, written=False)
    assert "left as it was" in kept.message and "is in" not in kept.message


def test_ctrl_c_before_the_run_began_leaves_an_earlier_result_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while /v1/models was asked had replaced an earlier good result at --out with an empty
    interrupted one (and said "the partial result … is in" it)."""
    import asyncio

    from llmdeck.bench import runner
    from llmdeck.bench.result_schema import ScenarioSpec, TargetInfo

    out = tmp_path / "good.json"
    good = '{"kind": "llmdeck.bench.result", "schema_version": 1, "earlier": true}'
    out.write_text(good)

    async def interrupted(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "probe_target", interrupted)
    options = runner.BenchOptions(out_path=out)
    with pytest.raises(KeyboardInterrupt):
        target = TargetInfo(base_url="http://127.0.0.1:9", model="m")
        asyncio.run(runner.run_bench_async(target, [ScenarioSpec(name="s", num_prompts=2)], options))
    assert out.read_text() == good


def test_a_double_ctrl_c_mid_bench_ends_with_the_partial_result(tmp_path: Path) -> None:
    """Two Ctrl-C 10 ms apart had hung the bench in asyncio's shutdown (4 of 5 runs), the file left
    "running": the second now waits for the first's clean-up."""
    srv = FakeSlowSSEServer(tmp_path, chunks=5, delay=0.02)
    out = tmp_path / "r.json"
    args = ["bench", srv.url, "--out", str(out), "--num-prompts", "3000", "--max-concurrency", "2"]
    args += ["--input-len", "8", "--output-len", "1", "--no-metrics"]
    lines: list[str] = []
    try:
        cli, reader = _bench(args, tmp_path, lines)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not out.exists():
            time.sleep(0.05)
        time.sleep(1.0)  # requests under way
        cli.send_signal(signal.SIGINT)
        time.sleep(0.01)
        cli.send_signal(signal.SIGINT)
        cli.wait(timeout=30)
        reader.join(5)
    finally:
        srv.kill()
        if cli.poll() is None:
            cli.kill()
    stderr = "".join(lines)
    assert cli.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]
    assert json.loads(out.read_text())["status"] == "interrupted"


def test_ctrl_c_during_the_warmup_marks_the_scenario_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario had stayed "running" in the file (and in report and the page) though the run ended."""
    import asyncio

    from llmdeck.bench import load, runner
    from llmdeck.bench.result_schema import ScenarioSpec, TargetInfo

    async def answered(*args: object, **kw: object) -> None:
        return None

    async def interrupted(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "probe_target", answered)
    monkeypatch.setattr(load.ScenarioRun, "warmup", interrupted)
    out = tmp_path / "r.json"
    target = TargetInfo(base_url="http://127.0.0.1:9", model="m")
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            runner.run_bench_async(
                target, [ScenarioSpec(name="s", num_prompts=2, warmup=2)], runner.BenchOptions(out_path=out)
            )
        )
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted" and data["scenarios"][0]["status"] == "interrupted"
