"""The real CLI (``python -m llmdeck``, a subprocess) under the environments users have: a closed stdout,
a pipe whose reader is gone, an ASCII-only stdout, ``COLUMNS=0``, a working folder that was deleted,
a HOME where nothing can be made, a relative XDG variable. Each had ended in an internal error (or
worse, exit 0 with the output gone); each is now a clear error with its exit code, or just works."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo_paths import ROOT

CONFIG = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3-0.6B.config.json"


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMDECK_", "XDG_"))}
    env.pop("COLUMNS", None)
    env.update({"LLMDECK_STATE_DIR": str(tmp / "state"), "PYTHONPATH": str(ROOT / "src"), **extra})
    return env


def _llmdeck(
    tmp: Path, *args: str, shell: str = "", cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``llmdeck ARGS``; ``shell`` is put before it in `sh -c` (``cd d && rmdir ../d &&``), and what
    follows it there (``>&-``) through ``env["AFTER"]``."""
    after = env.pop("AFTER", "")
    argv = [sys.executable, "-m", "llmdeck", *args]
    line = f'{shell} exec "$@" {after}'
    return subprocess.run(
        ["sh", "-c", line, "sh", *argv],
        env=_env(tmp, **env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or tmp,
    )


def _clean(result: subprocess.CompletedProcess[str]) -> str:
    text = " ".join(result.stderr.split())
    assert "Traceback" not in text and "internal error" not in text, text[-2000:]
    return text


@pytest.mark.parametrize(
    "args", [["status", "--json"], ["keys", "list", "--json"], ["--version"], ["logs", "x"]]
)
def test_a_closed_stdout_is_a_failed_write_not_a_bug(tmp_path: Path, args: list[str]) -> None:
    if args[0] == "logs":  # a log to print
        (tmp_path / "state" / "logs").mkdir(parents=True)
        (tmp_path / "state" / "logs" / "x.log").write_text("a line\n")
    result = _llmdeck(tmp_path, *args, AFTER=">&-")
    text = _clean(result)
    assert result.returncode == 1, text
    assert "stdout is closed" in text, text


@pytest.mark.parametrize("extra", [[], ["--json"]])
@pytest.mark.parametrize("where", ["closed", "broken pipe"])
def test_a_key_nobody_could_see_is_revoked(tmp_path: Path, where: str, extra: list[str]) -> None:
    if where == "closed":
        result = _llmdeck(tmp_path, "keys", "create", "alice", *extra, AFTER=">&-")
    else:  # the pipe's reader is gone before the key is written (`| head -0`)
        read, write = os.pipe()
        os.close(read)
        argv = [sys.executable, "-m", "llmdeck", "keys", "create", "alice", *extra]
        env = _env(tmp_path)
        result = subprocess.run(argv, env=env, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        os.close(write)
    text = _clean(result)
    assert result.returncode == 1, text
    assert "was revoked" in text, text
    listed = _llmdeck(tmp_path, "keys", "list", "--json")
    assert json.loads(listed.stdout) == [], "a key whose secret nobody saw stays valid"


def _unicode_model(tmp: Path) -> Path:
    model = tmp / "qwen-×-模型"
    model.mkdir()
    (model / "config.json").write_text(CONFIG.read_text())
    return model


def test_an_ascii_stdout_gets_non_ascii_escaped_not_an_internal_error(tmp_path: Path) -> None:
    model = _unicode_model(tmp_path)
    result = _llmdeck(tmp_path, "plan", str(model), "--machine", "h200", PYTHONIOENCODING="ascii")
    _clean(result)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "qwen-\\xd7-\\u6a21\\u578b" in result.stdout
    as_json = _llmdeck(tmp_path, "plan", str(model), "--machine", "h200", "--json", PYTHONIOENCODING="ascii")
    _clean(as_json)
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    assert json.loads(as_json.stdout)["model"]["name"] == "qwen-×-模型"  # the same document, \\u-escaped


def test_columns_zero_still_prints(tmp_path: Path) -> None:
    result = _llmdeck(tmp_path, "keys", "list", COLUMNS="0")
    assert result.returncode == 0, result.stderr
    assert "keys in" in result.stdout and "name" in result.stdout, "COLUMNS=0 printed nothing"
    helped = _llmdeck(tmp_path, "--help", COLUMNS="0")
    assert "Usage" in helped.stdout


@pytest.mark.parametrize(
    ("args", "env"),
    [(["status"], {"LLMDECK_STATE_DIR": "relstate"}), (["keys", "create", "a", "--keys-file", "k.json"], {})],
)
def test_a_deleted_working_folder_is_said(tmp_path: Path, args: list[str], env: dict[str, str]) -> None:
    (tmp_path / "gone").mkdir()
    result = _llmdeck(tmp_path, *args, shell="cd gone && rmdir ../gone &&", **env)
    text = _clean(result)
    assert result.returncode == 2, text
    assert "no longer exists" in text, text


def _homeless(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``llmdeck ARGS`` with a HOME where no folder can be made (and no LLMDECK_STATE_DIR)."""
    env = _env(tmp, HOME="/proc/llmdeck-home")
    del env["LLMDECK_STATE_DIR"]
    argv = [sys.executable, "-m", "llmdeck", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=tmp)


def test_a_default_folder_that_cannot_be_made_names_home_not_an_unset_variable(tmp_path: Path) -> None:
    result = _homeless(tmp_path, "keys", "create", "alice")  # a command that writes
    text = _clean(result)
    assert result.returncode == 2, text
    assert "LLMDECK_STATE_DIR is not set" in text and "HOME='/proc/llmdeck-home'" in text, text
    assert "unset LLMDECK_STATE_DIR" not in text  # it is unset: that advice could not help


def test_a_home_where_nothing_can_be_made_still_lets_doctor_and_status_run(tmp_path: Path) -> None:
    """Every command had stopped with exit 2, doctor included, whose job is to say what is wrong."""
    result = _homeless(tmp_path, "status", "--json")
    assert result.returncode == 0 and json.loads(result.stdout) == [], _clean(result)
    result = _homeless(tmp_path, "doctor", "--json")
    _clean(result)
    found = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "folders"]
    assert [f["status"] for f in found] == ["fail"], found
    assert "HOME='/proc/llmdeck-home'" in found[0]["message"] and "LLMDECK_STATE_DIR" in found[0]["fix"]


def test_a_relative_xdg_state_home_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.settings import Settings

    monkeypatch.delenv("LLMDECK_STATE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", "state")
    monkeypatch.chdir(tmp_path)
    assert Settings().state_dir == tmp_path / ".local" / "state" / "llmdeck"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 0), (signal.SIGTERM, 143)])
def test_logs_follow_ends_on_ctrl_c_and_says_sigterm(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Ctrl-C is how `logs -f` ends (exit 0, as documented); a SIGTERM (a supervisor, `timeout`) had
    been taken for it, exit 0 too: it is 143 now, as for every other command."""
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    (logs / "x.log").write_text("a line\n")
    argv = [sys.executable, "-m", "llmdeck", "logs", "-f", "x"]
    proc = subprocess.Popen(
        argv, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "a line\n"
    time.sleep(1)  # past the tail, into the follow
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err[-2000:]
    assert "Traceback" not in err, err[-2000:]


def test_keys_list_labels_its_times_utc(tmp_path: Path) -> None:
    """The 'created' column had been the UTC time with its zone cut off: read as local time."""
    assert _llmdeck(tmp_path, "keys", "create", "alice").returncode == 0
    listed = _llmdeck(tmp_path, "keys", "list", TZ="Asia/Shanghai", COLUMNS="200")
    row = next(line for line in listed.stdout.splitlines() if "alice" in line)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", row), row


def test_a_closed_stderr_keeps_usage_errors_out_of_the_json_on_stdout(tmp_path: Path) -> None:
    """click had printed its usage error to stdout when stderr was closed, before the JSON error."""
    result = _llmdeck(tmp_path, "status", "--bogus", "--json", AFTER="2>&-")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["kind"] == "UsageError", result.stdout


@pytest.mark.parametrize("home", ["~", "home", "./home", "~root"])
def test_a_home_that_is_not_an_absolute_path_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: str
) -> None:
    """HOME=~ (quoted in a unit file or a .env) made every command an internal error ("Could not
    determine home directory"); a relative HOME put llmdeck's records under whatever folder each command
    ran in, as a relative XDG_STATE_HOME had. Such a HOME is ignored: the user's home from the password
    database, as when HOME is unset."""
    import pwd

    from llmdeck.settings import Settings

    for var in ("LLMDECK_STATE_DIR", "LLMDECK_CACHE_DIR", "LLMDECK_MODELS_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", home)
    monkeypatch.chdir(tmp_path)
    real = Path(pwd.getpwuid(os.getuid()).pw_dir)
    settings = Settings()
    assert settings.state_dir == real / ".local" / "state" / "llmdeck"
    assert settings.cache_dir == real / ".cache" / "llmdeck"
    assert settings.models_dir == real / ".cache" / "huggingface" / "models"


@pytest.mark.parametrize("args", [["doctor", "--json"], ["status"]])
def test_home_tilde_is_no_internal_error(tmp_path: Path, args: list[str]) -> None:
    """`HOME=~ llmdeck doctor` was an internal error (every Path.home() outside the settings raised)."""
    result = _llmdeck(tmp_path, *args, HOME="~")
    assert "internal error" not in _clean(result), _clean(result)
