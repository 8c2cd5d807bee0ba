"""`check --client` and `connect` judged by what real clients send, on the real CPU engine.

The 4,096-token ``cpu_server`` (conftest) is the field case of issue 23: opencode's system prompt and
tool schemas alone do not fit. A second server (conftest's ``capped_server``, shared with the eval
tests) runs the same tiny model with ``--max-model-len 32768`` and replies capped at 48 tokens. Then
the real clients (npm ``opencode-ai``, ``@continuedev/cli``, at the recorded versions, installed here
if absent) run headless through the config `connect` wrote, and
every request they make must be answered 200 (counted in the server's own access log).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import CAPPED_CONTEXT
from real_clients import npm_recorded
from repo_paths import ROOT

# integration (the real CPU engine) and e2e (the real agent binaries): tests/e2e
pytestmark = [pytest.mark.integration, pytest.mark.e2e]
BIG = CAPPED_CONTEXT  # the session's capped_server (conftest): 32,768 tokens, replies of <= 48
OUTPUT_LIMIT = BIG // 4  # what connect writes for it: a quarter of the context (connect/configs.py)
ACCESS = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')


def run_cli(*args: str, tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"), COLUMNS="120"
    )
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture(scope="module")
def opencode_bin() -> Path:
    return npm_recorded("opencode")


@pytest.fixture(scope="module")
def cn_bin() -> Path:
    return npm_recorded("continue")


def client_logs(home: Path) -> str:
    """The client's own log lines that say what went wrong (opencode: XDG_DATA_HOME/opencode/log)."""
    lines = [
        line
        for f in sorted(home.rglob("*.log"))
        for line in f.read_text(errors="replace").splitlines()
        if "level=ERROR" in line or "error" in line.lower()
    ]
    return "\n".join(lines[-15:])


def statuses_after(log: Path, offset: int) -> list[int]:
    return [int(m) for m in ACCESS.findall(log.read_text(errors="replace")[offset:])]


def client_env(home: Path, work: Path) -> dict[str, str]:
    """A throwaway home; PWD too (opencode finds its project, and opencode.json, from $PWD)."""
    return dict(
        os.environ,
        PWD=str(work),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
    )


def project(tmp_path: Path) -> Path:
    work = tmp_path / "project"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "hello.py").write_text('print("hi")\n')
    return work


def test_check_opencode_fails_on_4096_with_the_fix(cpu_server: Any, tmp_path: Path) -> None:
    res = run_cli(
        "check",
        cpu_server.base_url,
        "--client",
        "opencode",
        "--json",
        "--long-context-tokens",
        "256",
        tmp_path=tmp_path,
    )
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    probes = {p["id"]: p for p in doc["probes"]}
    ctx = probes["client_context"]
    assert ctx["status"] == "fail" and ctx["required"]
    assert "--max-model-len 16384" in ctx["fix"]
    assert ctx["data"]["base_tokens"] > cpu_server.max_model_len and ctx["data"]["tools"] == 10
    assert "/tokenize" in ctx["data"]["counted"]
    # the server itself refuses opencode's own request: the field finding, reproduced
    req = probes["client_request"]
    assert req["status"] == "fail" and "context length" in req["summary"] and "--max-model-len" in req["fix"]
    assert probes["client_tool_stream"]["status"] == "skipped"
    # the generic probes alone still pass: only the client's traffic shows the trap
    generic = [p for p in doc["probes"] if p["required"] and not p["id"].startswith("client_")]
    assert all(p["status"] != "fail" for p in generic), generic


def test_connect_refuses_a_server_that_cannot_hold_opencode(cpu_server: Any, tmp_path: Path) -> None:
    path = tmp_path / "opencode.json"
    res = run_cli(
        "connect", "opencode", "--server", cpu_server.base_url, "--file", str(path), tmp_path=tmp_path
    )
    assert res.returncode == 1
    assert "--max-model-len 16384" in res.stderr and "Traceback" not in res.stderr
    assert not path.exists()


def test_unrecorded_client_gets_the_generic_probes_and_is_told(cpu_server: Any, tmp_path: Path) -> None:
    from llmdeck.checks import run_checks
    from llmdeck.settings import Settings

    report = run_checks(
        cpu_server.base_url,
        client="openclaw",
        model=None,
        api_key=None,
        settings=Settings(state_dir=tmp_path / "state"),
        long_context_tokens=256,
    )
    note = report.probe("client_traffic")
    assert note.status == "not_applicable" and "no recording of openclaw" in note.summary
    assert not any(p.id.startswith("client_") and p.id != "client_traffic" for p in report.probes)


def test_check_opencode_on_32k_finds_the_servers_output_cap(capped_server: Any, tmp_path: Path) -> None:
    """All of opencode's needs pass at 32,768 but one: this server caps replies at 48 tokens (#40)."""
    res = run_cli(
        "check",
        capped_server.base_url,
        "--client",
        "opencode",
        "--json",
        "--long-context-tokens",
        "256",
        tmp_path=tmp_path,
    )
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr
    probes = {p["id"]: p for p in json.loads(res.stdout)["probes"]}
    cap = probes["client_output_cap"]
    assert cap["status"] == "fail" and cap["data"]["cap"] == 48, cap
    assert "max_tokens 4096" in cap["summary"] and "max_new_tokens" in cap["fix"], cap
    failed = [p["id"] for p in probes.values() if p["required"] and p["status"] == "fail"]
    assert failed == ["client_output_cap"], failed
    ctx = probes["client_context"]
    assert ctx["status"] == "pass" and ctx["data"]["turns"] >= 4, ctx
    assert probes["client_request"]["status"] == "pass"
    assert probes["client_tool_stream"]["status"] in {"pass", "inconclusive"}, probes["client_tool_stream"]
    assert probes["client_thinking"]["status"] == "pass", probes["client_thinking"]


def test_real_opencode_runs_through_connects_config(
    capped_server: Any, opencode_bin: Path, tmp_path: Path
) -> None:
    work = project(tmp_path)
    res = run_cli(
        "connect",
        "opencode",
        "--server",
        capped_server.base_url,
        "--file",
        str(work / "opencode.json"),
        "--json",
        tmp_path=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    model = json.loads((work / "opencode.json").read_text())["provider"]["vllm"]["models"]["tiny-qwen3"]
    assert model["limit"] == {"context": BIG - 1024, "output": OUTPUT_LIMIT}
    log = Path(capped_server.log_path)
    offset = len(log.read_text(errors="replace"))
    run = subprocess.run(
        # --title: no title side request; --print-logs: opencode's own errors in the failure message
        [str(opencode_bin), "run", "--print-logs", "--title", "t", "-m", "vllm/tiny-qwen3", "Say hi."],
        cwd=work,
        env=client_env(tmp_path / "home", work),
        capture_output=True,
        text=True,
        timeout=500,
    )
    why = f"{run.stdout[-1500:]}{run.stderr[-1500:]}\n{client_logs(tmp_path / 'home')}"
    assert run.returncode == 0, why + "\n" + log.read_text(errors="replace")[offset:][-3000:]
    codes = statuses_after(log, offset)
    assert codes and all(c == 200 for c in codes), codes


def test_real_continue_runs_through_connects_config(capped_server: Any, cn_bin: Path, tmp_path: Path) -> None:
    work = project(tmp_path)
    config = tmp_path / "config.yaml"
    res = run_cli(
        "connect",
        "continue",
        "--server",
        capped_server.base_url,
        "--file",
        str(config),
        "--json",
        tmp_path=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    log = Path(capped_server.log_path)
    offset = len(log.read_text(errors="replace"))
    run = subprocess.run(
        [str(cn_bin), "-p", "--config", str(config), "Say hi."],
        cwd=work,
        env=client_env(tmp_path / "home", work),
        capture_output=True,
        text=True,
        timeout=500,
    )
    why = f"{run.stdout[-1500:]}{run.stderr[-1500:]}\n{client_logs(tmp_path / 'home')}"
    assert run.returncode == 0, why + "\n" + log.read_text(errors="replace")[offset:][-3000:]
    codes = statuses_after(log, offset)
    assert codes and all(c == 200 for c in codes), codes


SCHEMA = ROOT / "src/llmdeck/connect/schemas/opencode-provider.schema.json"


def test_connect_merges_opencode_config_on_32k(
    capped_server: Any, cpu_server_plain: Any, tmp_path: Path
) -> None:
    """Moved from test_check_integration (a 4,096 server now gets no opencode config at all)."""
    path = tmp_path / "opencode.json"
    path.write_text(
        json.dumps({"theme": "mine", "provider": {"ollama": {"npm": "@ai-sdk/openai-compatible"}}})
    )
    res = run_cli(
        "connect",
        "opencode",
        "--server",
        capped_server.base_url,
        "--file",
        str(path),
        "--json",
        tmp_path=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["action"] == "updated" and Path(out["backup"]).exists()
    said = f"opencode 1.18.33: context {BIG - 1024}, output {OUTPUT_LIMIT}"
    assert any(said in n for n in out["notes"]), out["notes"]
    doc = json.loads(path.read_text())
    assert doc["theme"] == "mine" and "ollama" in doc["provider"]
    model = doc["provider"]["vllm"]["models"][capped_server.served_model_name]
    assert model["limit"] == {"context": BIG - 1024, "output": OUTPUT_LIMIT}
    assert model["tool_call"] is True and model["reasoning"] is True
    assert doc["provider"]["vllm"]["options"]["baseURL"] == capped_server.base_url + "/v1"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()), cls=jsonschema.Draft202012Validator)
    # the plain server: tools off, and the user is told why (openclaw: no recording, generic limits)
    plain = run_cli(
        "connect", "openclaw", "--server", cpu_server_plain.base_url, "--print", "--json", tmp_path=tmp_path
    )
    assert plain.returncode == 0, plain.stderr
    pdoc = json.loads(plain.stdout)
    assert pdoc["action"] == "printed"
    entry = pdoc["config"]["models"]["providers"]["vllm"]["models"][0]
    assert entry["contextWindow"] == cpu_server_plain.max_model_len
    assert any("--enable-auto-tool-choice" in n for n in pdoc["notes"])
