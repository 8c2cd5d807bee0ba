"""`up` (and `restart`) whose stdout is closed: the server started, then "Cannot write the output"
(exit 1) read as a start that failed while the server ran on. The error now says the server is up,
its name and URL, and how to see and stop it; still exit 1 (the record the caller asked for is lost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeck.cli.server_parts import say_ready
from llmdeck.cli.streams import ClosedStream
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import OperationError
from llmdeck.runtime.state import ServerRecord


def _record(tmp_path: Path) -> ServerRecord:
    spec = LaunchSpec(name="demo", model=str(tmp_path / "model"), port=8123)
    return ServerRecord(
        name="demo", spec=spec, argv=["vllm", "serve"], pid=4242, log_path=tmp_path / "demo.log"
    )


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_a_closed_stdout_after_the_start_says_the_server_is_up_and_how_to_stop_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    monkeypatch.setattr("sys.stdout", ClosedStream("stdout", fail=True))
    with pytest.raises(OperationError) as caught:
        say_ready(_record(tmp_path), "ready demo", as_json=as_json)
    text = caught.value.render()
    assert caught.value.exit_code == 1
    assert "'demo' is up at http://127.0.0.1:8123/v1" in text, text
    assert "stdout is closed" in text and "`llmdeck down demo`" in text and "llmdeck status demo" in text


def test_an_open_stdout_gets_the_ready_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    say_ready(_record(tmp_path), "[green]ready[/] demo", as_json=False)
    assert capsys.readouterr().out == "ready demo\n"


def test_up_through_the_cli_says_the_server_is_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole command, with the start itself stood in for (it returns the record a start makes)."""
    from llmdeck.cli import server
    from llmdeck.cli.app import main

    (tmp_path / "model").mkdir()
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(server, "_run_up", lambda *a, **k: _record(tmp_path))
    monkeypatch.setattr("sys.stdout", ClosedStream("stdout", fail=True))
    with pytest.raises(SystemExit) as info:
        main(["up", "--model", str(tmp_path / "model"), "--name", "demo", "--engine", "cpu", "--json"])
    err = " ".join(capsys.readouterr().err.split())
    assert info.value.code == 1, err
    assert "'demo' is up at" in err and "`llmdeck down demo`" in err, err
