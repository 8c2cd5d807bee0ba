"""The H200 figures of issues 34 and 36, read back from the kept files (evidence/device/agents-clients/,
evidence/device/ollama/)."""

from __future__ import annotations

import json
import re

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
