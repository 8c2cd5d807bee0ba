"""Path traversal: a server name is validated once (llmdeck.util.names) before it becomes a path, by
every command that takes one. `logs ../../secret` and `down ../../x` exit 2 and touch nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.engines.spec import LaunchSpec

BAD_NAMES = ["../../secret", "../x", "a/b", "..", ".hidden", "-rf", "x" * 64, "a b", "a\nb", ""]


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "deep" / "state"
    (state / "servers").mkdir(parents=True)
    (state / "logs").mkdir()
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(state))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMDECK_DEBUG", raising=False)
    return state


def _check(code: int, err: str) -> None:
    assert code == 2, err
    assert "not a valid server name" in err and "Traceback" not in err and "internal error" not in err


def test_logs_outside_the_state_dir_is_refused(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = state.parent / "secret.log"  # logs/../../secret.log
    secret.write_text("TOPSECRET\n")
    code, out, err = run_cli(["logs", "../../secret"], capsys)
    _check(code, err)
    assert "TOPSECRET" not in out + err


def test_down_outside_the_state_dir_deletes_nothing(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = state.parent / "x.json"  # servers/../../x.json
    spec = LaunchSpec(name="x", engine="venv", model="/m")
    victim.write_text(
        json.dumps({"name": "x", "spec": spec.model_dump(mode="json"), "argv": [], "log_path": "/l"})
    )
    code, _, err = run_cli(["down", "../../x"], capsys)
    _check(code, err)
    assert victim.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["logs", "{}"],
        ["down", "{}"],
        ["status", "{}"],
        ["restart", "{}"],
        ["check", "{}"],
        ["bench", "{}", "--num-prompts", "1"],
        ["connect", "openai", "--print", "--server", "{}"],
        ["up", "--model", "/nonexistent", "--name", "{}"],
    ],
    ids=lambda a: a[0],
)
@pytest.mark.parametrize("name", ["../../secret", "a/b/../../c", ".."])
def test_every_command_taking_a_name_validates_it(
    state: Path, capsys: pytest.CaptureFixture[str], args: list[str], name: str
) -> None:
    code, _, err = run_cli([a.replace("{}", name) for a in args], capsys)
    assert code == 2, err
    if args[0] == "up":
        assert "name" in err and "Traceback" not in err
    else:
        _check(code, err)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_the_one_rule(name: str) -> None:
    from llmdeck.errors import UsageError
    from llmdeck.util.names import is_valid_server_name, validate_server_name

    assert not is_valid_server_name(name)
    with pytest.raises(UsageError):
        validate_server_name(name)


@pytest.mark.parametrize("name", ["default", "qwen3-coder", "a.b_c-1", "X" * 63])
def test_good_names_pass(name: str) -> None:
    from llmdeck.util.names import validate_server_name

    assert validate_server_name(name) == name
