"""connect for the terminal agents: Claude Code, Codex, Qwen Code, aider, the cline CLI.

The formats are those the real clients read (pinned versions, see llmdeck/connect/agents.py): each
key was found in the client's own code (``strings`` on the Claude Code and Codex binaries, Qwen Code's
bundled settings schema, aider's args.py) and then confirmed by running the client against a local
capture server: Claude Code sent ``max_tokens`` = CLAUDE_CODE_MAX_OUTPUT_TOKENS and ``claude -p /context``
showed CLAUDE_CODE_MAX_CONTEXT_TOKENS as its window; Codex named every key of a wrong type in its
error ("invalid type ... in `model_context_window`") and refused ``wire_api = "chat"``; Qwen Code's
``max_tokens`` followed ``samplingParams`` and ``contextWindowSize``. The integration test at the end
runs the real binaries on what connect wrote.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_helpers import run_cli
from llmdeck.checks.traffic import ClientReads, RecordedRequest, Recording
from llmdeck.connect import ServeInfo, connect_client
from llmdeck.errors import ConfigError, OperationError, UsageError
from real_clients import aider_parser_path, npm_pinned

DEAD = "http://127.0.0.1:9"  # nothing listens: a test that reaches the server fails differently


def info(**kw: object) -> ServeInfo:
    base: dict[str, object] = {
        "base_url": "http://127.0.0.1:8101",
        "model": "tiny-qwen3",
        "max_model_len": 40960,
        "tool_calls": True,
        "reasoning": True,
        "thinking_template": True,
        "thinking_default": True,
    }
    base.update(kw)
    return ServeInfo.model_validate(base)


# ---- Claude Code: the env block of settings.json ------------------------------------------------


def test_claude_code_env_block_merges_into_settings_and_backs_up(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    user = {
        "theme": "dark",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "env": {"MY_VAR": "1", "ANTHROPIC_MODEL": "claude-sonnet-4-5"},
    }
    path.write_text(json.dumps(user))
    result = connect_client("claude-code", info(api_key="sk-local"), file=path)
    doc = json.loads(path.read_text())
    assert doc["theme"] == "dark" and doc["permissions"] == user["permissions"]
    env = doc["env"]
    assert env["MY_VAR"] == "1"  # the user's own variables stay
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8101"  # the root: it POSTs /v1/messages itself
    assert env["ANTHROPIC_AUTH_TOKEN"] == "sk-local"
    assert env["ANTHROPIC_API_KEY"] == ""  # a shell ANTHROPIC_API_KEY would go out as x-api-key
    for var in ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"):
        assert env[var] == "tiny-qwen3"
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "40960"
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "10240"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert (
        result.action == "updated" and result.backup and json.loads(Path(result.backup).read_text()) == user
    )
    again = connect_client("claude-code", info(api_key="sk-local"), file=path)
    assert again.action == "unchanged"


def test_claude_code_print_is_shell_quoted_exports(tmp_path: Path) -> None:
    hostile = "m'; touch pwned; echo '"
    result = connect_client("claude-code", info(model=hostile), print_only=True, small_model="fast")
    assert result.action == "printed"
    assert "unset ANTHROPIC_API_KEY\n" in result.text
    assert "export ANTHROPIC_DEFAULT_HAIKU_MODEL=fast\n" in result.text
    script = result.text + 'printf %s "$ANTHROPIC_MODEL"'
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout == hostile and not (tmp_path / "pwned").exists()


def test_claude_code_notes_a_claude_named_model_and_thinking_off() -> None:
    result = connect_client("claude-code", info(model="claude-local"), print_only=True, thinking="off")
    assert result.config["env"]["CLAUDE_CODE_DISABLE_THINKING"] == "1"
    assert any("starts with 'claude-'" in n for n in result.notes)


# ---- Codex: config.toml -------------------------------------------------------------------------

CODEX_USER = """# my codex settings
approval_policy = "on-request"  # keep this comment
model = "gpt-5.5"

[features]
web_search = true

[mcp_servers.fs]
command = "mcp-fs"

[model_providers.other]
name = "Other"
base_url = "https://other.example/v1"
"""


def test_codex_toml_merge_keeps_comments_tables_and_order(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX_USER)
    result = connect_client("codex", info(), file=path, provider_id="llmdeck")
    text = path.read_text()
    assert "# my codex settings" in text and "# keep this comment" in text
    doc = tomllib.loads(text)
    assert doc["approval_policy"] == "on-request" and doc["mcp_servers"] == {"fs": {"command": "mcp-fs"}}
    assert doc["model_providers"]["other"]["base_url"] == "https://other.example/v1"
    mine = doc["model_providers"]["llmdeck"]
    assert mine == {
        "name": "llmdeck (tiny-qwen3)",
        "base_url": "http://127.0.0.1:8101/v1",
        "wire_api": "responses",
    }
    assert doc["model"] == "tiny-qwen3" and doc["model_provider"] == "llmdeck"
    assert doc["model_context_window"] == 40960
    assert doc["model_auto_compact_token_limit"] == 40960 - 10240
    assert doc["features"] == {"web_search": True, "plugins": False}  # the user's flag kept
    assert doc["analytics"] == {"enabled": False} and doc["check_for_update_on_startup"] is False
    assert result.backup and Path(result.backup).read_text() == CODEX_USER
    assert connect_client("codex", info(), file=path, provider_id="llmdeck").action == "unchanged"


def test_codex_key_is_a_bearer_token_in_a_0600_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "config.toml"
    connect_client("codex", info(api_key="sk-codex"), file=path)
    doc = tomllib.loads(path.read_text())
    assert doc["model_providers"]["vllm"]["experimental_bearer_token"] == "sk-codex"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_codex_print_is_toml_and_default_path_honours_codex_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed = connect_client("codex", info(), print_only=True)
    assert tomllib.loads(printed.text)["model_providers"]["vllm"]["wire_api"] == "responses"
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    written = connect_client("codex", info())
    assert written.path == str((tmp_path / "ch" / "config.toml").resolve())


def test_codex_malformed_toml_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "x"\n[model_providers\n')
    with pytest.raises(ConfigError) as exc:
        connect_client("codex", info(), file=path)
    assert exc.value.exit_code == 2 and "not valid TOML" in exc.value.message
    assert path.read_text() == 'model = "x"\n[model_providers\n'


# ---- Qwen Code: settings.json -------------------------------------------------------------------


def test_qwen_code_settings_merge_keeps_other_models(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    other = {
        "id": "qwen3-coder-plus",
        "baseUrl": "https://dashscope.example/v1",
        "envKey": "DASHSCOPE_API_KEY",
    }
    user = {"ui": {"theme": "GitHub"}, "modelProviders": {"openai": [other], "anthropic": [{"id": "c"}]}}
    path.write_text(json.dumps(user))
    connect_client("qwen-code", info(api_key="sk-q"), file=path)
    connect_client(
        "qwen-code", info(api_key="sk-q", max_model_len=65536), file=path
    )  # replaces, no duplicate
    doc = json.loads(path.read_text())
    assert doc["ui"] == {"theme": "GitHub"} and doc["modelProviders"]["anthropic"] == [{"id": "c"}]
    entries = doc["modelProviders"]["openai"]
    assert entries[0] == other and len(entries) == 2
    mine = entries[1]
    assert mine["id"] == "tiny-qwen3" and mine["baseUrl"] == "http://127.0.0.1:8101/v1"
    assert mine["generationConfig"] == {"contextWindowSize": 65536, "samplingParams": {"max_tokens": 16384}}
    assert doc["env"][mine["envKey"]] == "sk-q" and mine["envKey"] == "LLMDECK_VLLM_API_KEY"
    assert doc["security"]["auth"]["selectedType"] == "openai" and doc["model"]["name"] == "tiny-qwen3"
    assert doc["privacy"]["usageStatisticsEnabled"] is False


# ---- aider: .aider.conf.yml + .aider.model.metadata.json ----------------------------------------


def test_aider_conf_and_metadata_written_side_by_side(tmp_path: Path) -> None:
    conf = tmp_path / ".aider.conf.yml"
    conf.write_text("dark-mode: true\nmodel: gpt-4o\n")
    meta = tmp_path / ".aider.model.metadata.json"
    meta.write_text(json.dumps({"openai/other": {"max_input_tokens": 1}}))
    result = connect_client("aider", info(), file=conf)
    doc = yaml.safe_load(conf.read_text())
    assert doc["dark-mode"] is True and doc["model"] == "openai/tiny-qwen3"
    assert doc["openai-api-base"] == "http://127.0.0.1:8101/v1" and doc["openai-api-key"] == "EMPTY"
    assert doc["model-metadata-file"] == str(meta.absolute())
    table = json.loads(meta.read_text())
    assert table["openai/other"] == {"max_input_tokens": 1}
    assert table["openai/tiny-qwen3"]["max_input_tokens"] == 40960
    assert table["openai/tiny-qwen3"]["litellm_provider"] == "openai"
    assert [f.path for f in result.files] == [str(meta.resolve())] and result.files[0].action == "updated"


@pytest.mark.integration
@pytest.mark.e2e
def test_aider_reads_the_conf_with_its_own_parser(tmp_path: Path) -> None:
    """aider's real configargparse parser (args.get_parser, from the aider-chat 0.86.2 wheel) reading
    what connect wrote."""
    pythonpath = aider_parser_path()
    conf = tmp_path / ".aider.conf.yml"
    connect_client("aider", info(api_key="sk-a"), file=conf)
    code = (
        # aider.coders (imported by get_parser for the edit-format choices) needs litellm: a stub
        "import sys, json, types; sys.modules['aider.coders'] = types.SimpleNamespace(__all__=[]); "
        "from aider.args import get_parser; "
        "a = get_parser([sys.argv[1]], None).parse_args([]); "
        "print(json.dumps([a.model, a.openai_api_base, a.openai_api_key, a.model_metadata_file, "
        "a.check_update, a.analytics]))"
    )
    env = dict(os.environ, PYTHONPATH=pythonpath)
    out = subprocess.run(
        [sys.executable, "-c", code, str(conf)], capture_output=True, text=True, env=env, check=True
    )
    model, base, key, meta, check_update, analytics = json.loads(out.stdout)
    assert (model, base, key) == ("openai/tiny-qwen3", "http://127.0.0.1:8101/v1", "sk-a")
    assert meta == str(conf.with_name(".aider.model.metadata.json").absolute())
    assert check_update is False and analytics is False


@pytest.mark.integration
@pytest.mark.e2e
def test_aider_reads_the_launch_environment_over_its_conf(tmp_path: Path) -> None:
    """aider's own parser: the AIDER_* variables `launch` sets win over a .aider.conf.yml that says
    otherwise."""
    from test_launch import plan

    pythonpath = aider_parser_path()
    conf = tmp_path / ".aider.conf.yml"
    conf.write_text("model: gpt-4o\nopenai-api-base: https://elsewhere.example/v1\n")
    p = plan("aider", tmp_path)
    code = (
        "import sys, json, types; sys.modules['aider.coders'] = types.SimpleNamespace(__all__=[]); "
        "from aider.args import get_parser; a = get_parser([sys.argv[1]], None).parse_args([]); "
        "print(json.dumps([a.model, a.openai_api_base, a.model_metadata_file, a.check_update, a.analytics]))"
    )
    env = {**p.child_env(), "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [sys.executable, "-c", code, str(conf)], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout) == [
        "openai/tiny-qwen3",
        "http://127.0.0.1:8101/v1",
        p.env["AIDER_MODEL_METADATA_FILE"],
        False,
        False,
    ]


# ---- cline: the CLI's own `cline auth` ----------------------------------------------------------


def test_cline_gets_the_cli_auth_command_without_the_key_in_notes() -> None:
    result = connect_client("cline", info(api_key="sk-secret-cline"))
    assert result.commands == [
        [
            "cline",
            "auth",
            "-p",
            "openai",
            "-k",
            "sk-secret-cline",
            "-m",
            "tiny-qwen3",
            "-b",
            "http://127.0.0.1:8101/v1",
        ]
    ]
    note = next(n for n in result.notes if "cline auth" in n)
    assert '"$LLMDECK_API_KEY"' in note and "sk-secret-cline" not in note


# ---- your own inputs first (#38), then the server -----------------------------------------------


@pytest.mark.parametrize(
    ("client", "name", "content", "words"),
    [
        ("codex", "config.toml", "[[[", "not valid TOML"),
        ("claude-code", "settings.json", "{ // jsonc\n}", "not plain JSON"),
        ("qwen-code", "settings.json", "[1, 2]", "not an object"),
        ("aider", ".aider.conf.yml", "a: [1,\n", "not valid YAML"),
    ],
)
def test_malformed_user_file_is_exit_2_before_the_server(
    client: str, name: str, content: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(content)
    code, _out, err = run_cli(["connect", client, "--server", DEAD, "--file", str(path)], capsys)
    assert code == 2 and words in err and "reading" not in err  # the server was never asked
    assert path.read_text() == content


def test_read_only_and_symlinked_files_are_exit_2_before_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ro = tmp_path / "config.toml"
    ro.write_text("model = 'x'\n")
    ro.chmod(0o444)
    link = tmp_path / "link.toml"
    link.symlink_to(ro)
    for path in (ro, link):
        code, _out, err = run_cli(["connect", "codex", "--server", DEAD, "--file", str(path)], capsys)
        assert code == 2 and "read-only" in err and "reading" not in err, err
    # the default file too (no --file): a malformed ~/.codex/config.toml through CODEX_HOME
    home = tmp_path / "ch"
    home.mkdir()
    (home / "config.toml").write_text("[x\n")
    os.environ["CODEX_HOME"] = str(home)
    try:
        code, _out, err = run_cli(["connect", "codex", "--server", DEAD], capsys)
    finally:
        del os.environ["CODEX_HOME"]
    assert code == 2 and "not valid TOML" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["connect", "claude-desktop"], "Unknown client"),
        (["connect", "codex", "--provider-id", "a.b"], "not a provider id"),
        (["connect", "codex", "--thinking", "maybe"], "--thinking"),
        (["connect", "claude-code", "--small-model", " "], "--small-model"),
    ],
)
def test_bad_client_or_flags_are_exit_2_before_the_server(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run_cli([*args, "--server", DEAD], capsys)
    assert code == 2 and words in err and "reading" not in err


# ---- the context fit, with a recording this test builds -----------------------------------------


def fake_recording(client: str, tokens: int) -> Recording:
    body: dict[str, Any] = {"model": "m", "system": "You are an agent.", "messages": [], "stream": True}
    return Recording(
        client=client,
        client_version="9.9.9",
        package="test",
        command="test",
        recorded_at="2026-01-01T00:00:00+00:00",
        reads=ClientReads(source="test"),
        requests=[RecordedRequest(path="/v1/messages", prompt_tokens=tokens, body=body)],
    )


def test_fit_refuses_a_small_server_and_sets_limits_on_a_big_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.connect import limits

    monkeypatch.setattr(limits, "load_recording", lambda c: fake_recording(c, 18821))
    monkeypatch.setattr(limits, "base_prompt_tokens", lambda i, c, timeout=60.0: (18821, "test"))
    with pytest.raises(OperationError) as exc:
        limits.apply_client_limits("claude-code", info(max_model_len=16384))
    assert exc.value.exit_code == 1 and "--max-model-len 32768" in (exc.value.hint or "")
    fitted = limits.apply_client_limits("claude-code", info(max_model_len=32768))
    assert fitted.client_context == 32768 - 1024 and fitted.client_output == 8192
    env = connect_client("claude-code", fitted, print_only=True).config["env"]
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "31744" and env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "8192"
    toml = tomllib.loads(connect_client("codex", fitted, print_only=True).text)
    assert toml["model_context_window"] == 31744 and toml["model_auto_compact_token_limit"] == 31744 - 8192


def test_unknown_client_is_a_usage_error_in_the_library() -> None:
    with pytest.raises(UsageError):
        connect_client("claude", info())


# ---- the real binaries read what connect wrote (real CPU vLLM server) ---------------------------


@pytest.mark.integration
@pytest.mark.e2e
def test_real_claude_and_codex_accept_what_connect_wrote(
    cpu_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the 4,096-token server with a small recording of this test (the real ones need a bigger
    server): connect writes; the real ``claude -p /context`` shows the model and window it read and
    asks only the server; ``codex features list`` loads the config.toml (it exits 1 on a bad one)."""
    from llmdeck.connect import limits

    claude, codex = npm_pinned("claude-code"), npm_pinned("codex")
    monkeypatch.setattr(limits, "load_recording", lambda c: fake_recording(c, 900))
    claude_dir, codex_home = tmp_path / "claude", tmp_path / "codex"
    base = ["--server", cpu_server.base_url]
    code, _out, err = run_cli(
        ["connect", "claude-code", *base, "--file", str(claude_dir / "settings.json")], capsys
    )
    assert code == 0, err
    code, _out, err = run_cli(["connect", "codex", *base, "--file", str(codex_home / "config.toml")], capsys)
    assert code == 0, err
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TERM": "dumb"}
    ctx = subprocess.run(
        [str(claude), "-p", "/context"],
        env={**env, "CLAUDE_CONFIG_DIR": str(claude_dir)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ctx.returncode == 0, ctx.stderr
    # the window it read: 4096 less connect's 512-token margin = 3584, shown as 3.6k
    assert "**Model:** tiny-qwen3" in ctx.stdout and re.search(r"/ 3\.6k", ctx.stdout), ctx.stdout
    feats = subprocess.run(
        [str(codex), "features", "list"],
        env={**env, "CODEX_HOME": str(codex_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert feats.returncode == 0, feats.stderr
    assert any(
        line.split()[:1] == ["plugins"] and line.split()[-1] == "false" for line in feats.stdout.splitlines()
    )
    # a wrong key type makes the same binary fail: the check above is not vacuous
    bad = subprocess.run(
        [str(codex), "-c", 'model_context_window="x"', "features", "list"],
        env={**env, "CODEX_HOME": str(codex_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0


@pytest.mark.integration
def test_connect_refuses_a_server_too_small_and_writes_nothing(
    cpu_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 4,096-token server and a base prompt of Claude Code 2.1.197's size (18,821 tokens, recorded)."""
    from llmdeck.connect import limits

    monkeypatch.setattr(limits, "load_recording", lambda c: fake_recording(c, 18821))
    monkeypatch.setattr(limits, "base_prompt_tokens", lambda i, c, timeout=60.0: (18821, "test"))
    for client, name in (("claude-code", "settings.json"), ("codex", "config.toml")):
        path = tmp_path / name
        code, out, err = run_cli(
            ["connect", client, "--server", cpu_server.base_url, "--file", str(path)], capsys
        )
        assert code == 1 and "--max-model-len 32768" in err and "Traceback" not in err, err
        assert not path.exists() and out == ""


def test_json_output_of_the_agents_holds_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--json redacts the key in every form the agents carry it (a TOML bearer token, cline's argv)."""
    from llmdeck.cli import connect as cli_connect

    secret = "sk-llmdeck-agent-secret-123"
    monkeypatch.setattr("llmdeck.connect.gather_info", lambda *a, **k: info(api_key=secret))
    monkeypatch.setattr(cli_connect, "_gateway_or_target", lambda s, st: None)
    for client in ("claude-code", "codex", "qwen-code", "aider", "cline"):
        code, out, err = run_cli(
            ["connect", client, "--server", DEAD, "--api-key", secret, "--print", "--json"], capsys
        )
        assert code == 0, err
        assert secret not in out and secret not in err, client
        assert "<redacted>" in out, client
