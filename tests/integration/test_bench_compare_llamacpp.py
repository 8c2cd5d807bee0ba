"""`llmdeck bench --compare`: the CPU vLLM engine against llama.cpp's server (the Ollama-like engine:
Ollama itself does not install from the registries CI reaches), the same tiny Qwen3 on both.

llama.cpp's server is llama-cpp-python's (pinned in the Makefile, `make llamacpp`, built into
.cache/llamacpp-venv); the tiny model goes to GGUF with the `gguf` package's writer (tests/gguf_tiny.py),
float32, so both engines serve the same weights. The workload is the seeds' agent workload, small: a
shared system prompt, sessions of two turns, one session at a time (an agent; llama-cpp-python's server
runs one request at a time anyway), two rounds in ABBA order.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli_helpers import run_cli
from repo_paths import ROOT

pytestmark = pytest.mark.integration

LLAMACPP_PYTHON = ROOT / ".cache" / "llamacpp-venv" / "bin" / "python"
INSTALL_LOG = ROOT / ".cache" / "llamacpp-install.log"


@pytest.fixture(scope="module")
def tiny_gguf(tiny_model_dir: Path) -> Path:
    from gguf_tiny import write_tiny_gguf

    out = ROOT / ".cache" / "test-tiny.f32.gguf"
    src = tiny_model_dir / "model.safetensors"
    if not out.is_file() or out.stat().st_mtime < src.stat().st_mtime:
        write_tiny_gguf(tiny_model_dir, out)
    return out


@pytest.fixture(scope="module")
def llamacpp_url(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server (llama-cpp-python) on the tiny GGUF, on a free port."""
    from llmdeck.util.net import free_port

    if not LLAMACPP_PYTHON.is_file():
        why = INSTALL_LOG.read_text(errors="replace")[-400:] if INSTALL_LOG.is_file() else "not run"
        pytest.skip(f"llama.cpp's server is not installed ({LLAMACPP_PYTHON}; `make llamacpp`): {why}")
    port = free_port()
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    argv = [str(LLAMACPP_PYTHON), "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--n_ctx", "4096", "--model_alias", "tiny-qwen3", "--n_threads", "1"]
    argv += ["--interrupt_requests", "False"]  # its default: a new request cuts the one streaming
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"llama.cpp's server exited: {log.read_text()[-2000:]}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, (
                f"llama.cpp's server never answered: {log.read_text()[-2000:]}"
            )
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_compare_vllm_and_llamacpp_agent_sessions(
    cpu_server: Any, llamacpp_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp.json"
    args = ["bench", "--compare", cpu_server.base_url, f"{llamacpp_url}/v1"]
    args += ["--tokenizer", str(cpu_server.model_dir), "--prefix-len", "512", "--input-len", "32"]
    args += ["--output-len", "8", "--num-prompts", "4", "--num-turns", "2", "--max-concurrency", "1"]
    args += ["--temperature", "0", "--out", str(out), "--json"]
    t0 = time.monotonic()
    code, stdout, stderr = run_cli(args, capsys)
    assert code == 0, stderr
    assert time.monotonic() - t0 < 90
    whole = json.loads(stdout)
    assert whole == json.loads(out.read_text())
    assert whole["kind"] == "llmdeck.bench.versus" and whole["schema_version"] == 1
    assert whole["status"] == "complete" and whole["host"]["cpu_count"]
    assert whole["workload"]["workload"] == "agent-sessions" and whole["workload"]["prefix_len"] == 512
    assert whole["order"] == ["A1", "B1", "B2", "A2"]  # alternating, ABBA
    a, b = whole["a"], whole["b"]
    assert a["engine"] == "vllm" and a["result"]["target"]["server_version"]
    assert b["result"]["target"]["model"] == "tiny-qwen3"
    assert a["ollama"] == [] and b["ollama"] == []  # neither answers /api/ps
    for side in (a, b):
        runs = side["result"]["scenarios"]
        assert [r["status"] for r in runs] == ["done", "done"]
        errors = [q["error"] for r in runs for q in r["requests"] if q["error"]]
        assert all(r["metrics"]["completed"] == 4 and r["metrics"]["failed"] == 0 for r in runs), errors[:3]
    # the same prompts on both sides, round by round (one tokenizer, one seed per round)
    for ra, rb in zip(a["result"]["scenarios"], b["result"]["scenarios"], strict=True):
        assert [q["prompt_len"] for q in ra["requests"]] == [q["prompt_len"] for q in rb["requests"]]
    rows = {r["metric"]: r for r in whole["rows"]}
    for metric in ("mean TTFT", "mean TPOT"):
        row = rows[metric]
        assert row["a"] > 0 and row["b"] > 0 and row["ratio"] == pytest.approx(row["b"] / row["a"])
        assert len(row["a_runs"]) == len(row["b_runs"]) == 2
    hits = rows["prefix-cache hit rate"]
    assert hits["a"] is not None and hits["a"] > 0  # vLLM served the shared system prompt from cache
    assert hits["b"] is None  # llama-cpp-python's server has no /metrics: not reported, never 0
    code, again, _ = run_cli(["report", str(out), "--json"], capsys)
    assert code == 0 and json.loads(again)["rows"] == whole["rows"]
