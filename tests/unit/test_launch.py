"""`llmdeck launch`: the client's argv, environment and llmdeck's own files; the real exec.

What each client reads with the highest precedence was checked with the real binaries against a
capture server (a FAKE that logs requests): ``claude --settings FILE`` won over a user settings.json
whose env block pointed at another port and model, and the user's file was left as it was;
``codex -c key=value`` overrides (a wrong type is an error naming the key); Qwen Code's
``QWEN_CODE_SYSTEM_SETTINGS_PATH`` file won over a user settings.json that selected qwen-oauth;
opencode's ``OPENCODE_CONFIG_CONTENT`` won over a project opencode.json's ``model``. The
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.connect import ServeInfo
from llmdeck.connect.launch import KEY_VAR, LaunchPlan, find_binary, plan_launch, write_files
from llmdeck.errors import UsageError

DEAD = "http://127.0.0.1:9"
SECRET = "sk-llmdeck-launch-secret"


def info(**kw: object) -> ServeInfo:
    base: dict[str, object] = {
        "base_url": "http://127.0.0.1:8101",
        "model": "tiny-qwen3",
        "max_model_len": 40960,
    }
    base.update(kw)
    return ServeInfo.model_validate(base)


def plan(client: str, tmp_path: Path, **kw: object) -> LaunchPlan:
    return plan_launch(client, f"/bin/{client}", info(**kw), tmp_path / "state", ["--extra", "arg"])


def test_claude_code_gets_a_settings_file_of_llmdecks_and_its_env(tmp_path: Path) -> None:
    p = plan("claude-code", tmp_path, api_key=SECRET)
    settings = str(tmp_path / "state" / "launch" / "claude-code" / str(os.getpid()) / "settings.json")
    assert p.argv == ["/bin/claude-code", "--settings", settings, "--extra", "arg"]
    assert p.files[settings]["env"]["ANTHROPIC_AUTH_TOKEN"] == SECRET
    assert p.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8101" and p.unset == ["ANTHROPIC_API_KEY"]
    child = p.child_env({"ANTHROPIC_API_KEY": "sk-ant-real", "PATH": "/usr/bin"})
    assert "ANTHROPIC_API_KEY" not in child and child["PATH"] == "/usr/bin"
    write_files(p)
    assert stat.S_IMODE(Path(settings).stat().st_mode) == 0o600
    assert json.loads(Path(settings).read_text())["env"]["ANTHROPIC_MODEL"] == "tiny-qwen3"


def test_codex_overrides_keep_the_key_off_the_command_line(tmp_path: Path) -> None:
    p = plan("codex", tmp_path, api_key=SECRET)
    assert SECRET not in " ".join(p.argv) and p.env == {KEY_VAR: SECRET}
    pairs = dict(p.argv[i + 1].split("=", 1) for i, a in enumerate(p.argv) if a == "-c")
    assert pairs["model_providers.llmdeck.env_key"] == '"LLMDECK_API_KEY"'
    assert pairs["model_providers.llmdeck.wire_api"] == '"responses"'
    assert pairs["model_providers.llmdeck.base_url"] == '"http://127.0.0.1:8101/v1"'
    assert pairs["model_context_window"] == "40960" and pairs["features.plugins"] == "false"
    assert p.argv[-2:] == ["--extra", "arg"]
    # without a key: no env_key (codex would refuse a missing variable)
    assert not any("env_key" in a for a in plan("codex", tmp_path).argv)


def test_qwen_opencode_and_aider_environments(tmp_path: Path) -> None:
    q = plan("qwen-code", tmp_path)
    path = q.env["QWEN_CODE_SYSTEM_SETTINGS_PATH"]
    assert q.files[path]["modelProviders"]["openai"][0]["envKey"] == KEY_VAR and q.env[KEY_VAR] == "EMPTY"
    assert "env" not in q.files[path]
    o = plan("opencode", tmp_path, api_key=SECRET)
    content = json.loads(o.env["OPENCODE_CONFIG_CONTENT"])
    assert content["model"] == "llmdeck/tiny-qwen3"
    assert content["provider"]["llmdeck"]["options"] == {
        "baseURL": "http://127.0.0.1:8101/v1",
        "apiKey": "{env:LLMDECK_API_KEY}",
    }
    assert SECRET not in o.env["OPENCODE_CONFIG_CONTENT"] and o.env[KEY_VAR] == SECRET
    a = plan("aider", tmp_path)
    assert a.env["AIDER_MODEL"] == "openai/tiny-qwen3" and a.env["AIDER_OPENAI_API_BASE"].endswith("/v1")
    assert a.files[a.env["AIDER_MODEL_METADATA_FILE"]]["openai/tiny-qwen3"]["max_input_tokens"] == 40960


def test_shown_plan_redacts_the_key_everywhere(tmp_path: Path) -> None:
    for client in ("claude-code", "codex", "qwen-code", "opencode", "aider"):
        shown = json.dumps(plan(client, tmp_path, api_key=SECRET).shown())
        assert SECRET not in shown, client
    for short in ("true", "1", "n", '"'):  # a key that is a JSON word had been replaced in the JSON text
        shown = json.dumps(plan("opencode", tmp_path, api_key=short).shown())
        assert json.loads(shown)["argv"][0] == "/bin/opencode" and "<redacted>" in shown, short


def test_a_second_launch_does_not_rewrite_the_files_a_running_one_reads(tmp_path: Path) -> None:
    """Both had used <state>/launch/claude-code/settings.json: the first client read the second's
    server and key. Each launch has its pid's folder (the client runs as that pid); ended ones go."""
    gone = tmp_path / "state" / "launch" / "claude-code" / "999999999"
    gone.mkdir(parents=True)
    (gone / "settings.json").write_text("{}")
    p = plan("claude-code", tmp_path)
    write_files(p)
    assert str(os.getpid()) in p.argv[2] and not gone.exists()


def test_a_client_that_cannot_be_executed_is_exit_2_in_words(tmp_path: Path) -> None:
    from llmdeck.connect.launch import exec_client

    script = tmp_path / "noshebang"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    p = plan_launch("codex", str(script), info(), tmp_path / "state", [])
    with pytest.raises(UsageError, match=r"Cannot start .*noshebang: Exec format error"):
        exec_client(p)


def test_missing_binary_is_exit_2_with_the_pinned_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError) as exc:
        find_binary("codex", None)
    assert "npm install -g @openai/codex@0.171.0" in (exc.value.hint or "")
    code, _out, err = run_cli(["launch", "claude-code", DEAD], capsys)
    assert code == 2 and "@anthropic-ai/claude-code@2.1.332" in err and "reading" not in err
    code, _out, err = run_cli(["launch", "vim", DEAD], capsys)
    assert code == 2 and "cannot launch" in err
    code, _out, err = run_cli(["launch", "codex", DEAD, "stray"], capsys)
    assert code == 2 and "after `--`" in err


def test_an_empty_model_is_refused_before_the_server_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--model", "--small-model"):
        code, _out, err = run_cli(["launch", "claude-code", DEAD, "--bin", "/bin/true", flag, " "], capsys)
        assert code == 2 and f"{flag} is empty" in err and "reading" not in err, err


def test_a_launchs_folder_goes_once_its_client_has_exited(tmp_path: Path) -> None:
    """Claude Code's settings (the key in their env block) had stayed under <state>/launch/ after the
    client exited, until a later launch pruned them: `launch` execs the client, so a watcher it leaves
    removes the folder once that process (the pid, with its start tick) has ended."""
    import subprocess
    import sys
    import threading

    from llmdeck.util.after_exit import start_tick, sweep

    folder = tmp_path / "launch" / "claude-code" / "42"
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text('{"env": {"ANTHROPIC_AUTH_TOKEN": "sk-x"}}')
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.6)"])
    tick = start_tick(client.pid)
    assert tick is not None
    watcher = threading.Thread(target=sweep, args=(client.pid, tick, folder, 0.05))
    watcher.start()
    try:
        threading.Event().wait(0.3)
        assert (folder / "settings.json").exists()  # the client still runs: its settings stay
        client.wait(10)  # reaped, or left a zombie: both are an end
    finally:
        watcher.join(10)
    assert not folder.exists()
    assert start_tick(client.pid) is None or start_tick(client.pid) != tick
