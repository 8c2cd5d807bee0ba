"""Reading what Claude Code 2.1.197 and codex 0.171.0 print headless, and telling a run that never
reached the model from one where the model did badly (issue 40: aider exits 0 after a 401).

The event lines are the real clients' own (tests/fixtures/eval/README.md says where each came from).
The last tests run the real runner with a FAKE agent replaying aider's real 401 output, and the real
clients (when installed) against a FAKE server that answers /v1/models and refuses everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import tomllib
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from http_fakes import JsonHandler
from llmdeck.bench.result_schema import TargetInfo
from llmdeck.evals import claude, codex
from llmdeck.evals.agents import (
    AgentSetup,
    StreamState,
    agent_env,
    argv_for,
    client_version,
    feed,
    prepare_home,
)
from llmdeck.evals.results import AgentRun
from llmdeck.evals.runner import EvalOptions, run_eval
from llmdeck.evals.spec import find_task
from llmdeck.settings import Settings
from repo_paths import ROOT, TEST_FIXTURES
from test_eval_harness import fake_agent, fake_vllm_server  # noqa: F401 (fixtures)

FIX = TEST_FIXTURES / "eval"


def _feed(client: str, *names: str) -> tuple[StreamState, list[Any]]:
    """Feed the fixture files as the prompts of one task, in order."""
    state = StreamState(run=AgentRun(client=client))
    turns = []
    for prompt, name in enumerate(names):
        state.prompt = prompt
        for i, line in enumerate((FIX / name).read_text().splitlines(keepends=True)):
            turn = feed(client, state, line, prompt * 100.0 + i)
            if turn is not None:
                turns.append(turn)
    return state, turns


def _client_of(fixture: str) -> str:
    return next(c for c in ("claude-code", "codex", "aider", "opencode") if fixture.startswith(c + "-"))


def test_claude_code_on_the_tiny_model_one_turn_per_streamed_message() -> None:
    """Three requests of Claude Code 2.1.197's ~19k-token base prompt, each cut at the server's 48 tokens."""
    state, turns = _feed("claude-code", "claude-code-2.1.197-tiny.jsonl")
    run = state.run
    assert run.session_id == "2bfd91f9-5578-4dc2-81a7-2a144a2d88d0"
    assert [t.reason for t in turns] == ["max_tokens"] * 3
    assert [t.tokens.output for t in turns] == [48, 48, 48]
    assert all(18000 < t.tokens.input < 20000 for t in turns)  # its base prompt and tools
    assert run.tokens.total == sum(t.tokens.total for t in turns)
    assert [e.kind for e in run.transcript] == ["reasoning"] * 3  # the random thinking, kept
    assert run.unreached is None


def test_claude_code_tool_call_and_its_result() -> None:
    state, turns = _feed("claude-code", "claude-code-2.1.197-tool-call.jsonl")
    assert [(t.reason, t.tools) for t in turns] == [("tool_use", ["Bash"]), ("end_turn", [])]
    assert [(t.tokens.input, t.tokens.output) for t in turns] == [(1234, 30), (1234, 9)]
    tool, text = state.run.transcript
    assert tool.kind == "tool" and tool.tool == "Bash" and tool.status == "error"
    assert '"command": "sed -i' in tool.text and "→ Exit code 2" in tool.text
    assert text.kind == "text" and text.text == "Fixed: add now returns a + b."
    assert state.run.unreached is None


@pytest.mark.parametrize(
    ("name", "kind", "status", "words"),
    [
        ("claude-code-2.1.197-401.jsonl", "auth", 401, "authentication_failed"),
        ("claude-code-2.1.197-404.jsonl", "not_found", 404, "issue with the selected model"),
        ("claude-code-2.1.197-refused.jsonl", "connection", None, "Unable to connect to API"),
        ("codex-0.171.0-401.jsonl", "auth", 401, "401 Unauthorized"),
        ("codex-0.171.0-404.jsonl", "not_found", 404, "404 Not Found"),
        ("codex-0.171.0-refused.jsonl", "connection", None, "Connection failed"),
        ("aider-0.86.2-401.txt", "auth", 401, "litellm.AuthenticationError"),
        ("aider-0.86.2-404.txt", "not_found", 404, "litellm.NotFoundError"),
        ("aider-0.86.2-refused.txt", "connection", None, "Connection error"),
        ("opencode-1.18.33-401.jsonl", "auth", 401, "invalid api key"),
        ("opencode-1.18.33-404.jsonl", "not_found", 404, "Not Found"),
    ],
)
def test_a_client_that_never_reached_the_model_says_so(name: str, kind: str, status: Any, words: str) -> None:
    state, turns = _feed(_client_of(name), name)
    got = state.run.unreached
    assert got is not None and (got.kind, got.status) == (kind, status), got
    assert words in got.message and not turns
    assert got.sentence().startswith("failed to reach the model: ")


@pytest.mark.parametrize(
    "names",
    [
        ("claude-code-2.1.197-tiny.jsonl",),
        ("codex-0.171.0-tiny-prompt1.jsonl",),
        ("aider-0.86.2-fix-intervals-tiny.txt",),
        ("opencode-1.18.33-thinking.jsonl",),
    ],
)
def test_a_model_that_answered_badly_is_not_unreached(names: tuple[str, ...]) -> None:
    state, _ = _feed(_client_of(names[0]), *names)
    assert state.run.unreached is None


def test_codex_two_prompts_of_one_thread() -> None:
    """codex exec, then exec resume: one turn per prompt, tokens summed by codex over its requests."""
    state, turns = _feed("codex", "codex-0.171.0-tiny-prompt1.jsonl", "codex-0.171.0-tiny-prompt2.jsonl")
    assert state.run.session_id == "01a2386e-bdc2-7030-9353-2d4a69d6585a"
    assert [(t.prompt, t.reason) for t in turns] == [(0, "stop"), (1, "stop")]
    first = turns[0].tokens
    assert (first.input, first.cache_read, first.reasoning, first.output) == (9092, 3584, 48, 0)
    assert turns[1].tokens.input > turns[0].tokens.input  # the whole history resent
    assert [e.kind for e in state.run.transcript] == ["error", "error"]  # its model-metadata warning


def test_codex_tool_call_is_a_turn_and_the_prompt_end_carries_the_tokens() -> None:
    state, turns = _feed("codex", "codex-0.171.0-tool-call.jsonl")
    assert [(t.reason, t.tools) for t in turns] == [("tool-calls", ["shell"]), ("stop", [])]
    assert turns[0].tokens.total == 0 and (turns[1].tokens.input, turns[1].tokens.output) == (4690, 50)
    tool = next(e for e in state.run.transcript if e.kind == "tool")
    assert (
        tool.tool == "shell" and tool.status == "failed" and "sed -i" in tool.text and "(exit 2)" in tool.text
    )
    assert state.run.transcript[-1].text == "Fixed: add now returns a + b."


def test_lines_that_are_not_events() -> None:
    for client in ("claude-code", "codex"):
        state = StreamState(run=AgentRun(client=client))
        assert feed(client, state, "WARNING: not json\n", 0.0) is None
        assert feed(client, state, "[1, 2]\n", 0.0) is None
        assert feed(client, state, '{"type": "stream_event", "event": "x"}\n', 0.0) is None
        assert state.run.transcript[0].text == "WARNING: not json" and state.run.unreached is None
    state = StreamState(run=AgentRun(client="codex"))
    turn = feed("codex", state, '{"type": "turn.completed", "usage": {"input_tokens": "x"}}\n', 0.0)
    assert turn is not None and turn.tokens.total == 0


def _setup(tmp_path: Path, key: str | None = "sk-test") -> AgentSetup:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir(parents=True)
    home.mkdir()
    return AgentSetup(ws, home, "http://127.0.0.1:9", "m", key, Path("/x/bin"), "/py", max_model_len=32768)


def test_claude_code_command_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _setup(tmp_path)
    first = argv_for("claude-code", s, "-do it", 0, None)
    assert first[:2] == ["/x/bin", "-p"] and first[-2:] == ["--", "-do it"]
    assert "stream-json" in first and "--include-partial-messages" in first and "--resume" not in first
    again = argv_for("claude-code", s, "more", 1, "sess-1")
    assert again[again.index("--resume") + 1] == "sess-1"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-users-own")  # the user's own setup never reaches it
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    env = agent_env(s, "claude-code")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9" and env["ANTHROPIC_AUTH_TOKEN"] == "sk-test"
    assert env["ANTHROPIC_MODEL"] == env["ANTHROPIC_SMALL_FAST_MODEL"] == "m"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["HOME"] == str(s.home)
    assert "ANTHROPIC_API_KEY" not in env and "CLAUDE_CODE_USE_BEDROCK" not in env
    assert agent_env(_setup(tmp_path / "k", None), "claude-code")["ANTHROPIC_AUTH_TOKEN"] == claude.NO_KEY
    # the server's window and a reply cap: 2.1.332 takes an unknown model as 1M tokens and never compacts
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "32768" and env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "8192"
    unknown = AgentSetup(s.workspace, s.home, "http://127.0.0.1:9", "m", None, s.binary, "")
    assert "CLAUDE_CODE_MAX_CONTEXT_TOKENS" not in claude.env(unknown)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert claude.env(s)["IS_SANDBOX"] == "1"
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    assert "IS_SANDBOX" not in claude.env(s)


def test_codex_command_config_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _setup(tmp_path)
    first = argv_for("codex", s, "-do it", 0, None)
    assert first[:3] == ["/x/bin", "exec", "--json"] and first[-2:] == ["--", "-do it"]
    assert first[first.index("-C") + 1] == str(s.workspace)
    again = argv_for("codex", s, "more", 1, "thread-1")
    assert again[1:3] == ["exec", "resume"] and again[-3:] == ["thread-1", "--", "more"]
    prepare_home("codex", s)
    conf = tomllib.loads((s.home / ".codex" / "config.toml").read_text())
    provider = conf["model_providers"][conf["model_provider"]]
    assert provider["wire_api"] == "responses" and provider["base_url"] == "http://127.0.0.1:9/v1"
    assert conf["model"] == "m" and conf["model_context_window"] == 32768
    assert conf["features"]["plugins"] is False and conf["analytics"]["enabled"] is False
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-own")
    env = agent_env(s, "codex")
    assert env["CODEX_HOME"] == str(s.home / ".codex") and env[provider["env_key"]] == "sk-test"
    assert "OPENAI_API_KEY" not in env and "sk-test" not in (s.home / ".codex" / "config.toml").read_text()
    bare = _setup(tmp_path / "nokey", None)
    assert "env_key" not in codex.config_text(bare) and codex.KEY_ENV not in agent_env(bare, "codex")
    quoted = AgentSetup(s.workspace, s.home, 'http://h"x', 'a"b\\c', None, s.binary, "")
    assert tomllib.loads(codex.config_text(quoted))["model"] == 'a"b\\c'


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        ("2.1.197 (Claude Code)", "2.1.197"),
        ("2.1.332 (Claude Code)", "2.1.332"),
        ("codex-cli 0.171.0", "0.171.0"),
        ("aider 0.86.2", "0.86.2"),
    ],
)
def test_client_version_from_what_each_prints(tmp_path: Path, printed: str, version: str) -> None:
    exe = tmp_path / "client"
    exe.write_text(f"#!/bin/sh\necho '{printed}'\n")
    exe.chmod(0o755)
    assert client_version(exe) == version


def test_a_run_that_never_reached_the_model_is_not_scored(
    fake_vllm_server: str,  # noqa: F811 (the fixture, imported)
    fake_agent: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    """aider's real output after a 401, then the agent lingers: stopped at once, not scored, exit 1."""
    monkeypatch.setenv("FAKE_AGENT", "replay")
    monkeypatch.setenv("FAKE_REPLAY", str(FIX / "aider-0.86.2-401.txt"))
    monkeypatch.setenv("FAKE_SLEEP", "120")
    out = tmp_path / "eval.json"
    options = EvalOptions(client="aider", binary=fake_agent, out_path=out)
    target = TargetInfo(base_url=fake_vllm_server, model="")
    result = asyncio.run(
        run_eval([find_task("fix-intervals")], target, options, Settings(state_dir=tmp_path))
    )
    (run,) = result.runs
    assert run.status == "unreachable" and run.tests is None and run.score is None and not run.passed
    assert run.agent is not None and run.agent.unreached is not None and run.agent.unreached.kind == "auth"
    assert run.agent.wall_s < 30  # not the 120 s it would have lingered, nor the task's 900 s
    assert run.agent.transcript[-1].kind == "unreachable"
    assert run.error and "refused the client's API key (401)" in run.error
    s = result.summary
    assert s.runs == 0 and s.runs_unreachable == 1 and s.score is None
    assert "1 task run(s) failed to reach the model" in s.verdict
    code, text, err = run_cli(
        ["eval", "--client", "aider", "--agent-bin", str(fake_agent), "--task", "fix-intervals",
         "--server", fake_vllm_server, "--out", str(out), "--html", str(tmp_path / "e.html")],
        capsys,
    )  # fmt: skip
    assert code == 1 and "never reached the model" in err and "API key (401)" in err, err
    assert "unreachable (auth)" in text
    page = (tmp_path / "e.html").read_text()
    assert "failed to reach the model" in page and "Runs that failed to reach the model" in page


class _Refusing(JsonHandler):
    """FAKE server: lists one model; every other request (HEAD / included) is refused with a 401."""

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models"):
            self._json(200, {"object": "list", "data": [{"id": "tiny-qwen3", "max_model_len": 32768}]})
        else:
            self._refuse()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._refuse()

    def do_HEAD(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _refuse(self) -> None:
        self._json(
            401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid key"}}
        )


@contextlib.contextmanager
def _refusing_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


def _installed(client: str) -> Path:
    from llmdeck.evals.agents import BINARIES

    exe = ROOT / ".cache" / "clients" / client / "node_modules" / ".bin" / BINARIES[client]
    if not exe.exists():
        pytest.skip(
            f"{client} is not installed in .cache/clients (test_eval_clients_integration installs it)"
        )
    return exe


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_the_real_client_refused_by_the_server(client: str, tmp_path: Path, capsys: Any) -> None:
    """The real client against a FAKE server that lists the model and answers 401 to everything else."""
    exe = _installed(client)
    with _refusing_server() as url:
        code, _, err = run_cli(
            ["eval", "--client", client, "--agent-bin", str(exe), "--task", "fix-intervals", "--server", url,
             "--timeout", "120", "--out", str(tmp_path / "e.json")],
            capsys,
        )  # fmt: skip
    assert code == 1 and "never reached the model" in err and "API key (401)" in err, err
    from llmdeck.evals.results import load_eval_result

    (run,) = load_eval_result(tmp_path / "e.json").runs
    assert run.status == "unreachable" and run.agent is not None and run.agent.wall_s < 60
    assert run.tests is None  # the hidden tests did not run: there is nothing of the model's to test
