"""`llmdeck eval` end to end on the real CPU engine: the real opencode (npm, the recorded version) runs a
task through the harness against a named llmdeck server, then the hidden tests run.

The tiny model has random weights, so the score is 0 and the result says why: what is proven is the
harness — the agent ran headless with connect's config, its turns, tokens and transcript were recorded,
the server's flags came from its runtime record and its /metrics were sampled, the hidden tests ran.
The server is the session's capped_server (conftest: 32,768 tokens, since opencode's base prompt does
not fit in 4,096; replies capped at 48 tokens, conftest says why).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from real_clients import npm_recorded
from repo_paths import ROOT

# integration (the real CPU engine) and e2e (the real agent binaries): tests/e2e
pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def llmdeck(*args: str, state: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(state), COLUMNS="150")
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def test_real_opencode_through_the_harness(
    capped_server: Any,
    session_settings: Any,
    tmp_path: Path,
) -> None:
    opencode = npm_recorded("opencode")
    out, page = tmp_path / "eval.json", tmp_path / "eval.html"
    res = llmdeck(
        "eval", "--client", "opencode", "--task", "fix-intervals", "--server", capped_server.name,
        "--agent-bin", str(opencode), "--max-turns", "3", "--timeout", "300", "--out", str(out),
        "--html", str(page),
        state=session_settings.state_dir,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "llmdeck.eval.result" and doc["schema_version"] == 1 and doc["status"] == "complete"
    assert doc["client"] == "opencode" and doc["client_version"] == "1.18.33"
    target = doc["target"]
    assert target["server_name"] == capped_server.name and "--max-model-len" in target["server_args"]
    (info,) = doc["tasks"]
    assert info["reference_ok"] is True and len(info["hidden_tests"]) == 8
    (run,) = doc["runs"]
    assert run["status"] == "done", run.get("error")
    agent = run["agent"]
    assert agent["exit_codes"] and agent["turns"], agent["stderr_tail"]
    assert agent["tokens"]["input"] > 1000  # opencode's own base prompt and tools went to the server
    assert agent["transcript"][0]["kind"] == "prompt" and "merge.py" in agent["transcript"][0]["text"]
    assert agent["session_id"], agent["transcript"]
    assert any(t["server_ttft_ms"] is not None for t in agent["turns"]), agent["turns"]
    # the hidden tests ran, on the workspace as the agent left it: random weights fix nothing
    tests = run["tests"]
    assert tests["total"] == 8 and not run["passed"] and run["score"] == 0.0
    assert {t["id"] for t in tests["tests"]} == set(info["hidden_tests"])
    assert run["server_metrics"]["samples"] >= 2 and run["server_metrics"]["engine"] == "vllm"
    summary = doc["summary"]
    assert summary["score"] == 0.0 and summary["random_weights"] is True
    assert "random-weight" in summary["verdict"] and "harness" in summary["verdict"]
    html = page.read_text()
    assert "fix-intervals" in html and "<script" not in html
    # the table: the same verdict, and `report` re-renders the saved result
    again = llmdeck("report", str(out), state=session_settings.state_dir)
    assert again.returncode == 0 and "fix-intervals" in again.stdout and "score 0.00" in again.stdout
