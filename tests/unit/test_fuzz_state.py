"""Fuzz suite: the local server records, found by a bad-input sweep of status, down, logs, restart.

A record whose pid no process can have (0, negative, past 2**31) was an internal error in status, down
and down --all; an unreadable record's message named the Python error class (ValidationError,
UnicodeDecodeError); a named pipe put where a server's secrets live hung restart before it stopped
anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fuzz_helpers import assert_clean_failure, run_main

# true and "77" are no pid either: pydantic had read them as 1 (init) and 77
BAD_PIDS: list[object] = [-1, 0, 2**40, True, "77"]


def _record(state: Path, name: str = "demo", **change: object) -> Path:
    """A server record as `llmdeck up` writes it, with ``change`` applied to its JSON."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord, StateStore

    spec = LaunchSpec(name=name, model=str(state / "nomodel"), port=18999, served_model_name=None)
    rec = ServerRecord(name=name, spec=spec, argv=["vllm", "serve"], log_path=state / f"{name}.log")
    store = StateStore(state / "servers")
    store.save(rec)
    path = store.path(name)
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pid", BAD_PIDS, ids=[f"status:record-pid-{p}" for p in BAD_PIDS])
def test_a_record_with_an_impossible_pid_is_not_a_record(
    pid: object, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _record(Path(fuzz_env["tmp"]) / "state", pid=pid)
    for argv in (["status"], ["status", "--json"], ["down", "--all"]):
        code, _out, err, _ = run_main(argv, capsys)
        flat = " ".join(err.split())
        assert code == 0 and "internal error" not in flat, flat
        assert f"skipped the unreadable server record {path} (not a record)" in flat
    for argv in (["status", "demo"], ["down", "demo"], ["logs", "demo"]):
        code, _out, err, elapsed = run_main(argv, capsys)
        assert_clean_failure(code, err, elapsed, want=2, needles=(str(path), "not a record"), seconds=15)
    assert path.exists()  # nothing is deleted behind the user's back


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("content", "says"),
    [(b"{bad", "not a record"), (b"\xff\xfe", "not UTF-8 text"), (None, "named pipe")],
    ids=["status:record-not-json", "status:record-not-utf8", "status:record-a-fifo"],
)
def test_an_unreadable_record_is_named_in_words_not_python_types(
    content: bytes | None, says: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servers = Path(fuzz_env["tmp"]) / "state" / "servers"
    servers.mkdir(parents=True)
    path = servers / "demo.json"
    os.mkfifo(path) if content is None else path.write_bytes(content)
    code, _out, err, elapsed = run_main(["status", "demo"], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(str(path), says), seconds=15)
    for python_name in ("ValidationError", "UnicodeDecodeError", "NotRegularFileError", "JSONDecodeError"):
        assert python_name not in err


@pytest.mark.timeout(60)
def test_a_record_copied_under_another_name_is_not_that_servers_record(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`alias.json` holding `name: demo` had been listed as a second demo, and `down alias` had stopped
    demo's server while removing only the copy."""
    path = _record(Path(fuzz_env["tmp"]) / "state")
    copy = path.with_name("alias.json")
    copy.write_text(path.read_text())
    code, out, err, _ = run_main(["status", "--json"], capsys)
    assert code == 0 and [s["name"] for s in json.loads(out)] == ["demo"], out
    assert "it is the record of server 'demo', not 'alias': a copy?" in " ".join(err.split())
    code, _out, err, elapsed = run_main(["down", "alias"], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(str(copy), "a copy?"), seconds=15)
    assert path.exists() and copy.exists()


@pytest.mark.timeout(10)
def test_a_pipe_where_the_secrets_live_is_not_waited_on(tmp_path: Path) -> None:
    """restart read the secrets with a plain open: a FIFO there hung it before it stopped anything."""
    from llmdeck.runtime.state import StateStore

    store = StateStore(tmp_path / "servers")
    store.servers_dir.mkdir()
    os.mkfifo(store.secrets_path("demo"))
    assert store.load_secrets("demo") == {}
    store.secrets_path("demo").unlink()
    store.save_secrets("demo", {"VLLM_API_KEY": "k"})
    assert store.load_secrets("demo") == {"VLLM_API_KEY": "k"}


@pytest.mark.timeout(60)
def test_a_dead_servers_unreadable_log_does_not_hide_the_others(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A dead server whose log is a folder had made `status` exit 2 for every server."""
    state = Path(fuzz_env["tmp"]) / "state"
    _record(state, "zz", pid=2**22 + 12345)  # no such process: dead
    (state / "zz.log").mkdir()
    _record(state, "other", pid=2**22 + 12346)
    for argv in (["status"], ["status", "--json"]):
        code, out, err, _ = run_main(argv, capsys)
        assert code == 0 and "other" in out and "zz" in out, err
        assert "log cannot be read" in out + err


@pytest.mark.timeout(60)
def test_logs_of_a_broken_record_show_its_log(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated record had made `logs NAME` exit 2 ("delete it and start again", which rotates the log
    away) although logs/NAME.log was there."""
    state = Path(fuzz_env["tmp"]) / "state"
    (state / "servers").mkdir(parents=True)
    (state / "servers" / "cr.json").write_text('{"name":"cr","trunc')
    (state / "logs").mkdir()
    (state / "logs" / "cr.log").write_text("EngineCore failed: out of memory\n")
    code, out, err, _ = run_main(["logs", "cr"], capsys)
    assert code == 0 and "out of memory" in out and "not a record" in err


@pytest.mark.timeout(60)
def test_restart_of_a_server_whose_model_moved_stops_nothing(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """restart had stopped the server, then found the model gone (exit 2): down, its record and launch
    flags lost. The spec is checked first now."""
    state = Path(fuzz_env["tmp"]) / "state"
    path = _record(state, "rs1", pid=os.getpid())  # a live pid: restart would stop (or forget) it
    code, _out, err, _ = run_main(["restart", "rs1"], capsys)
    assert code == 2 and "nomodel" in err and "stopping" not in err
    assert path.exists()


@pytest.mark.timeout(60)
def test_logs_says_when_it_shows_fewer_lines_than_asked(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`logs -n 100000` of a big log had shown the last 200 KB without a word."""
    logs = Path(fuzz_env["tmp"]) / "state" / "logs"
    logs.mkdir(parents=True)
    (logs / "big.log").write_text("".join(f"line {i}\n" for i in range(60_000)))
    code, out, err, _ = run_main(["logs", "big", "-n", "100000"], capsys)
    assert code == 0 and "line 59999" in out and "the last 200 KB" in err
    code, out, err, _ = run_main(["logs", "big", "-n", "10"], capsys)
    assert code == 0 and "the last 200 KB" not in err


@pytest.mark.parametrize(
    ("err", "want", "needle"),
    [(30, 2, "Read-only file system"), (28, 1, "No space left")],  # EROFS, ENOSPC
    ids=["read-only", "full"],
)
def test_a_state_folder_on_a_read_only_or_full_disk_is_a_clean_error(
    err: int, want: int, needle: str, fuzz_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """`keys create` with the state folder on a read-only (or full) file system: "internal error:
    OSError: [Errno 30] Read-only file system" from making its folder (only 'permission denied' and a
    file in the way were errors in words)."""

    def cannot(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(err, os.strerror(err), str(self))

    monkeypatch.setattr(Path, "mkdir", cannot)
    code, _out, stderr, elapsed = run_main(["keys", "create", "alice"], capsys)
    assert_clean_failure(code, stderr, elapsed, want=want, needles=(needle, "gateway"), seconds=20)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{bad", "not JSON, or not a gateway record"),
        (b"\xff\xfe", "not UTF-8 text"),
        (None, "it is a named pipe (FIFO), not a regular file"),
    ],
    ids=["status:gateway-record-not-json", "status:gateway-record-not-utf8", "status:gateway-record-a-fifo"],
)
def test_an_unreadable_gateway_record_does_not_hide_the_servers(
    content: bytes | None, says: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A gateway record that cannot be read had made `status` exit 2, the servers' table unshown; now the
    servers are listed and a warning says what is wrong with the record and what to do (exit 0, as for an
    unreadable server record)."""
    state = Path(fuzz_env["tmp"]) / "state"
    _record(state, "other", pid=2**22 + 12346)  # no such process: dead
    path = state / "gateway" / "gateway.json"
    path.parent.mkdir(parents=True)
    os.mkfifo(path) if content is None else path.write_bytes(content)
    for argv in (["status"], ["status", "--json"]):
        code, out, err, _ = run_main(argv, capsys)
        flat = " ".join(err.split())
        assert code == 0 and "other" in out, (out, err)
        assert f"warning: The gateway record {path} is unreadable ({says}). Delete {path}" in flat, flat
        assert "ValidationError" not in flat and "internal error" not in flat
