"""The H200 figures of issue 34 (evidence/device/agents/), recomputed from the kept benchmark files."""

from __future__ import annotations

import json

import pytest

from repo_paths import ROOT

AGENTS = ROOT / "evidence" / "device" / "agents"


@pytest.mark.parametrize("api,added", [("messages", -3.66), ("responses", -1.57)])
def test_gateway_adds_no_ttft_on_either_surface(api: str, added: float) -> None:
    doc = json.loads((AGENTS / f"gateway_overhead_h200-{api}-c16.json").read_text())
    assert doc["schema"] == "llmdeck.gateway_overhead/1" and doc["params"]["api"] == api
    direct, gateway = doc["summary"]["direct"], doc["summary"]["llmdeck"]
    assert direct["failed"] == 0 and gateway["failed"] == 0 and gateway["requests"] == 768
    assert round(gateway["ttft_p50_ms"] - direct["ttft_p50_ms"], 2) == added
    assert gateway["added_ttft_p50_ms"] <= 1.0


def test_vllm_022_refuses_claude_codes_second_system_message() -> None:
    doc = json.loads((AGENTS / "check-claude-code-direct.json").read_text())
    probes = {p["id"]: p for p in doc["probes"]}
    assert probes["client_request"]["status"] == "fail"
    assert "'user' or 'assistant'" in probes["client_request"]["summary"]
    assert probes["messages_stream"]["status"] == "pass"


def test_the_gateways_fold_lets_vllm_022_take_claude_codes_request() -> None:
    """The same run through `llmdeck gateway` with `messages: {fold_system: true}` on the route."""
    doc = json.loads((AGENTS / "check-claude-code-gateway.json").read_text())
    probes = {p["id"]: p for p in doc["probes"]}
    assert probes["client_request"]["status"] == "pass"
    assert probes["messages_system"]["status"] == "pass"
