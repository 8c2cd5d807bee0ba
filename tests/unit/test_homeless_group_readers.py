"""`llmdeck keys list` and `llmdeck gateway status` with a HOME where no folder can be made (on /proc, or
a HOME that is a file) and no LLMDECK_STATE_DIR. Both only read, yet both stopped with exit 2 on the
state folder's default, as every command had before doctor and status were let run there: the root
knew its readers by their first word only, and a group's readers ("keys list") have two. A HOME that is
a file stopped even doctor and status. Readers now run and say nothing is recorded; the writers of
the same groups (`keys create`, `keys revoke`, `gateway up`) keep their exit 2 and its message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli

HOMES = ["proc", "file"]


@pytest.fixture(params=HOMES)
def homeless(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A HOME under /proc (a virtual file system) or one that is a file; no LLMDECK_*/XDG_* folder set."""
    if request.param == "proc":
        home = "/proc/llmdeck-home"
    else:
        (tmp_path / "home").write_text("not a folder\n", encoding="utf-8")
        home = str(tmp_path / "home")
    for var in ("LLMDECK_STATE_DIR", "LLMDECK_CACHE_DIR", "LLMDECK_MODELS_DIR"):
        monkeypatch.delenv(var, raising=False)
    for var in ("XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", home)
    monkeypatch.chdir(tmp_path)
    return home


def test_keys_list_reads_nothing_recorded_and_says_so(
    homeless: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["keys", "list", "--json"], capsys)
    assert (code, json.loads(out)) == (0, []), err
    code, out, err = run_cli(["keys", "list"], capsys)
    assert code == 0 and "No keys recorded yet" in out, err


def test_gateway_status_says_it_is_stopped(homeless: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["gateway", "status", "--json"], capsys)
    assert (code, json.loads(out)) == (0, {"state": "stopped"}), err
    code, out, err = run_cli(["gateway", "status"], capsys)
    assert code == 0 and "stopped" in out, err


def test_status_runs_with_a_home_that_is_a_file_too(
    homeless: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["status", "--json"], capsys)
    assert (code, json.loads(out)) == (0, []), err


@pytest.mark.parametrize("args", [["cluster", "status"], ["cluster", "logs"]])
def test_cluster_readers_say_no_cluster_as_on_an_empty_state(
    homeless: str, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """What they say with nothing recorded anywhere (exit 2, how to start one), not the folder error."""
    code, out, err = run_cli(args, capsys)
    assert out == "" and code == 2 and "No cluster started by llmdeck" in err, err
    assert "LLMDECK_STATE_DIR is not set" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["keys", "create", "alice"],
        ["keys", "revoke", "alice"],
        ["gateway", "up"],
        ["gateway", "down"],
        ["cluster", "up", "--local"],
    ],
)
def test_the_groups_writers_keep_their_exit_2(
    homeless: str, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(args, capsys)
    flat = " ".join(err.split())
    assert code == 2 and out == "", err
    assert "LLMDECK_STATE_DIR is not set" in flat and f"HOME={homeless!r}" in flat, flat
