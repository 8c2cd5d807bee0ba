"""llmdeck check / connect against the real CPU vLLM server, with and without tool/reasoning flags.

cpu_server: --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3
cpu_server_plain: none of those. The verdicts must differ exactly where the flags matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmdeck.checks import CheckReport, run_checks
from llmdeck.checks.probes import AUTO_TOOL_ERROR
from llmdeck.settings import Settings
from repo_paths import ROOT

pytestmark = pytest.mark.integration
SCHEMA = ROOT / "src/llmdeck/connect/schemas/opencode-provider.schema.json"
# Cap the long-context prompt (the CPU engine is slow); the over-limit refusal still uses max_model_len.
LONG = 512


def check(server: Any, client: str | None, tmp_path: Path, **kw: Any) -> CheckReport:
    settings = Settings(state_dir=tmp_path / "state")
    return run_checks(
        server.base_url,
        client=client,
        model=server.served_model_name,
        api_key=kw.pop("api_key", None),
        settings=settings,
        long_context_tokens=LONG,
        **kw,
    )


def run_cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"), COLUMNS="120"
    )
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def tools_report(cpu_server: Any, tmp_path_factory: pytest.TempPathFactory) -> CheckReport:
    return check(cpu_server, "opencode", tmp_path_factory.mktemp("tools"))


@pytest.fixture(scope="module")
def plain_report(cpu_server_plain: Any, tmp_path_factory: pytest.TempPathFactory) -> CheckReport:
    return check(cpu_server_plain, "opencode", tmp_path_factory.mktemp("plain"))


def test_both_servers_serve_the_basics(
    tools_report: CheckReport, plain_report: CheckReport, cpu_server: Any
) -> None:
    for report in (tools_report, plain_report):
        for probe_id in (
            "health",
            "api_key",
            "models",
            "chat",
            "completions",
            "streaming_usage",
            "long_context",
        ):
            assert report.probe(probe_id).status == "pass", report.probe(probe_id)
        assert report.server.model == cpu_server.served_model_name
        assert report.server.max_model_len == cpu_server.max_model_len
        assert report.server.server_version
        assert report.server.thinking_template is True  # the real Qwen3 template has enable_thinking
        assert report.server.thinking_default is True
        # every probe carries what was sent and what came back
        assert all(p.evidence for p in report.probes if p.status not in {"not_applicable", "skipped"})
    stream = tools_report.probe("streaming_usage")
    assert stream.data["done"] is True and stream.data["usage"]["completion_tokens"] > 0


def test_tool_verdicts_differ(tools_report: CheckReport, plain_report: CheckReport) -> None:
    # with the parser: the server accepts everything; the random model decides the rest
    assert tools_report.server.auto_tool_choice is True
    for probe_id in ("tool_auto", "tool_named", "tool_parallel"):
        assert tools_report.probe(probe_id).status in {"pass", "inconclusive"}, tools_report.probe(probe_id)
    assert tools_report.probe("tool_result").status == "pass"
    auto = tools_report.probe("tool_auto")
    if auto.status == "inconclusive":
        assert "not a tool call" in auto.summary
    # without: vLLM's own 400 text is the evidence, and the fix names the flags
    assert plain_report.server.auto_tool_choice is False
    auto_plain = plain_report.probe("tool_auto")
    assert auto_plain.status == "fail" and auto_plain.required
    assert [e.status_code for e in auto_plain.evidence] == [400]
    assert AUTO_TOOL_ERROR in json.loads(auto_plain.evidence[0].received or "{}")["error"]["message"]
    assert AUTO_TOOL_ERROR in auto_plain.summary
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in (auto_plain.fix or "")
    for probe_id in ("tool_named", "tool_parallel", "tool_result"):
        assert plain_report.probe(probe_id).status == "fail", plain_report.probe(probe_id)


def test_reasoning_verdicts_differ(tools_report: CheckReport, plain_report: CheckReport) -> None:
    split = tools_report.probe("reasoning_split")
    assert split.status == "pass" and tools_report.server.reasoning_field == "reasoning"
    assert tools_report.server.reasoning_parser is True
    plain_split = plain_report.probe("reasoning_split")
    assert plain_split.status == "fail" and "--reasoning-parser qwen3" in (plain_split.fix or "")
    assert plain_report.server.reasoning_parser is False
    # thinking off per request works on both (the template honours enable_thinking)
    assert tools_report.probe("thinking_control").status == "pass"
    assert plain_report.probe("thinking_control").status == "pass"
    # server default is thinking on: agents are warned, with the server flag as the fix
    default = tools_report.probe("thinking_default")
    assert default.status == "warn" and "--default-chat-template-kwargs" in (default.fix or "")
    # seed 000's trap: only where a reasoning parser takes the thoughts out of content
    trap = tools_report.probe("content_null_trap")
    assert (
        trap.status == "warn" and trap.data["content_null"] is True and trap.data["finish_reason"] == "length"
    )
    assert plain_report.probe("content_null_trap").status == "pass"


def test_readiness_depends_on_the_client(
    tools_report: CheckReport, plain_report: CheckReport, cpu_server_plain: Any, tmp_path: Path
) -> None:
    # the generic probes all pass for opencode on the tools server: only opencode's own recorded
    # request (7.2K prompt tokens, issue 23) does not fit its 4,096 tokens
    assert {p.id for p in tools_report.failed_required} == {"client_context", "client_request"}
    assert not plain_report.ok
    assert {p.id for p in plain_report.failed_required} >= {"tool_auto", "reasoning_split"}
    # a plain OpenAI SDK user needs none of the tool/reasoning probes
    sdk = check(cpu_server_plain, "openai", tmp_path, probes=["chat", "streaming_usage"])
    assert sdk.ok and sdk.client == "openai"


def test_api_key_given_to_an_open_server(cpu_server: Any, tmp_path: Path) -> None:
    report = check(cpu_server, None, tmp_path, api_key="sk-anything", probes=[])
    assert report.probe("api_key").status == "pass"
    assert "accepted and ignored" in report.probe("api_key").summary
    assert report.server.api_key_required is False


def test_cli_exit_codes_and_json(cpu_server: Any, cpu_server_plain: Any, tmp_path: Path) -> None:
    ok = run_cli(
        "check",
        cpu_server.base_url,
        "--client",
        "continue",
        "--json",
        "--long-context-tokens",
        "256",
        tmp_path=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["schema_version"] == 1 and doc["kind"] == "llmdeck.check" and doc["llmdeck_version"]
    assert doc["client"] == "continue" and doc["server"]["max_model_len"] == cpu_server.max_model_len
    bad = run_cli(
        "check",
        cpu_server_plain.base_url,
        "--client",
        "cline",
        "--long-context-tokens",
        "256",
        tmp_path=tmp_path,
    )
    assert bad.returncode == 1
    assert "NOT READY" in bad.stdout and "tool_auto" in bad.stdout
    assert "Traceback" not in bad.stderr
    # what failed, checked again alone (--probe): still failing here; on the server with the tool parser
    # it and a client's own probe (continue's request fits this server; cline's does not) pass
    plain = cpu_server_plain.base_url
    again = run_cli("check", plain, "-c", "cline", "--probe", "tool_auto", tmp_path=tmp_path)
    assert again.returncode == 1 and "(only tool_auto asked for): tool_auto failed" in again.stdout
    fixed = run_cli(
        "check", cpu_server.base_url, "-c", "continue", "--probe", "tool_auto", "--probe", "client_request",
        "--json", tmp_path=tmp_path,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    ran = [p["id"] for p in json.loads(fixed.stdout)["probes"]]
    assert ran == ["health", "api_key", "models", "tool_auto", "client_request"]
    usage = run_cli("check", "ftp://nowhere", tmp_path=tmp_path)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
