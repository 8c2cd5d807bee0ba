"""The H200 figures of issues 34 and 36, read back from the kept files (evidence/device/agents-clients/,
evidence/device/ollama/, and its gpu/: llama.cpp's CUDA server beside vLLM)."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from repo_paths import ROOT

DEVICE = ROOT / "evidence" / "device"
CLIENTS = DEVICE / "agents-clients"
OLLAMA = DEVICE / "ollama"


def test_the_real_clients_ran_on_vllm_022_through_the_gateway() -> None:
    versions = (CLIENTS / "versions.txt").read_text()
    assert (
        "2.1.197 (Claude Code)" in versions and "codex-cli 0.171.0" in versions and "vllm 0.22.0" in versions
    )
    runs = dict(re.findall(r"^(\S+): exit (\d+)", (CLIENTS / "agents.txt").read_text(), re.M))
    assert runs == {
        "claude-direct": "1",  # vLLM 0.22 refuses its second system message (fold_system fixes it)
        "codex-direct": "0",
        "claude-gateway": "0",
        "codex-gateway": "0",
        "claude-wrongkey": "1",
        "codex-wrongkey": "1",
    }
    assert "Input should be 'user' or 'assistant'" in (CLIENTS / "claude-direct.out").read_text()
    for client in ("claude-code", "codex"):
        assert f"check {client} gateway: exit 0" in (CLIENTS / "agents.txt").read_text()


def test_through_the_gateway_every_client_request_kept_alias_and_key_and_got_200() -> None:
    rows = re.findall(
        r"(POST|HEAD) (/v1/messages|/v1/responses|/) route=(\S+) key=(\S+) backend=\S+ status=(\d{3})",
        (CLIENTS / "gateway.log").read_text(),
    )
    surfaces = [r for r in rows if r[1] != "/"]
    assert surfaces and all(r[2] == "coder" and r[3] == "agents" and r[4] == "200" for r in surfaces)
    checks = {
        c: json.loads((CLIENTS / f"check-{c}-gateway.json").read_text()) for c in ("claude-code", "codex")
    }
    status = {c: {p["id"]: p["status"] for p in r["probes"]} for c, r in checks.items()}
    assert (
        status["claude-code"]["messages_system"] == "pass"
        and status["claude-code"]["client_request"] == "pass"
    )
    assert status["codex"]["responses_tools"] == "pass" and status["codex"]["client_request"] == "pass"


def test_vllm_vs_llamacpp_on_the_agent_workload() -> None:
    r = json.loads((OLLAMA / "compare-h200.json").read_text())
    assert r["status"] == "complete" and r["order"] == ["A1", "B1", "B2", "A2"]
    rows = {x["metric"]: x for x in r["rows"]}
    assert round(rows["median TTFT"]["a"], 1) == 45.4 and round(rows["median TTFT"]["b"]) == 3166
    assert round(rows["mean TTFT"]["ratio"], 1) == 93.2 and rows["failed"]["a"] == rows["failed"]["b"] == 0
    assert round(rows["prefix-cache hit rate"]["a"], 1) == 89.3
    assert r["a"]["result"]["target"]["server_version"] == "0.22.0"
    log = (OLLAMA / "llamacpp-server.log").read_text()
    assert log.count("4104 prefix-match hit") == 22  # llama.cpp kept the shared system prompt only


# ---- engine for engine: llama.cpp's CUDA server beside vLLM on the same H200 (evidence/device/ollama/gpu/)

GPU = OLLAMA / "gpu"


def _versus(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _medians_by_turn(side: dict[str, Any]) -> list[float]:
    by_turn: dict[int, list[float]] = {}
    for scenario in side["result"]["scenarios"]:
        for req in scenario["requests"]:
            by_turn.setdefault(req["turn"], []).append(1000 * req["ttft"])
    return [statistics.median(v) for _, v in sorted(by_turn.items())]


@pytest.mark.parametrize(
    ("name", "median_a", "median_b", "hits_b"),
    [
        ("qwen3-0.6b-c1", 41.8, 62.1, 82.8),
        ("qwen3-8b-c1", 50.7, 91.1, 82.7),
        ("qwen3-0.6b-c8", 236.3, 436.5, 84.7),
        ("qwen3-8b-c8", 194.5, 964.5, 84.6),
    ],
)
def test_both_engines_on_the_gpu_on_seed_000s_workload(
    name: str, median_a: float, median_b: float, hits_b: float
) -> None:
    r = _versus(GPU / f"compare-{name}.json.gz")
    assert r["status"] == "complete" and r["order"] == ["A1", "B1", "B2", "A2"]
    assert r["a"]["engine"] == "vllm" and r["a"]["result"]["target"]["server_version"] == "0.22.0"
    assert r["b"]["engine"] == "llamacpp"
    rows = {x["metric"]: x for x in r["rows"]}
    assert rows["failed"]["a"] == rows["failed"]["b"] == 0
    assert round(rows["median TTFT"]["a"], 1) == median_a and round(rows["median TTFT"]["b"], 1) == median_b
    assert round(rows["prefix-cache hit rate"]["b"], 1) == hits_b  # llama.cpp's own prompt cache


def test_llamacpp_ran_on_the_h200_with_its_default_slots() -> None:
    assert "CUDA0: NVIDIA H200" in (GPU / "llamacpp-version.txt").read_text()
    for log in (GPU / "llamacpp-qwen3-8b.log", GPU / "long" / "llamacpp-qwen3-8b.log"):
        assert "n_slots = 4, n_ctx_slot = 32768, kv_unified = 'true'" in log.read_text()


def test_long_sessions_llamacpp_grows_with_the_history_and_vllm_stays_flat() -> None:
    r = _versus(GPU / "long" / "compare-qwen3-8b-c1-long.json.gz")
    assert r["status"] == "complete" and r["workload"]["num_turns"] == 8
    a, b = _medians_by_turn(r["a"]), _medians_by_turn(r["b"])
    assert len(a) == len(b) == 8
    assert max(a) < 130 and b[-1] > 1700 and b[-1] / a[-1] > 13
    assert b[0] < b[1] < b[2] < b[3]  # turns 2-4: it computes the session's history again
    computed = [int(n) for n in re.findall(r"prompt eval time = +[\d.]+ ms / +(\d+) tokens", _long_log())]
    assert computed[1:13] == [5137, 1033, 1033, 2197, 2208, 2196, 3367, 3373, 3365, 4536, 4542, 4535]


def _long_log() -> str:
    return (GPU / "long" / "llamacpp-qwen3-8b.log").read_text()


def test_report_reads_a_gzipped_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["report", str(GPU / "compare-qwen3-8b-c8.json.gz")], capsys)
    assert code == 0 and "4.96x" in out and "engine llamacpp" in out
