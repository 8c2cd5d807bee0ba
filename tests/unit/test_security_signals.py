"""Signals to the wrong process: a record whose pid now belongs to another program is stale —
`status` says so (not "starting"), `down` and `restart` never signal it. The other program here is
a real, unrelated `sleep 300` started by the test."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from cli_helpers import run_cli
from llmdeck.engines.spec import LaunchSpec
from llmdeck.util.net import free_port

VLLM_ARGV = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "/models/m", "--port", "8000"]


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMDECK_DEBUG", raising=False)


@pytest.fixture()
def unrelated_sleep() -> Iterator[subprocess.Popen[bytes]]:
    """Another program (in its own session, like any process a user runs)."""
    import psutil

    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    # Popen returns once exec has begun; /proc/PID/cmdline reads empty until the kernel has set up the
    # new program's arguments (seen under load): wait for it, bounded.
    deadline = time.monotonic() + 5
    while not psutil.Process(proc.pid).cmdline() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(5)


def _write_record(tmp_path: Path, pid: int, *, with_identity: bool) -> Path:
    """A record as llmdeck wrote it when it started a server that has since died; the system then
    gave its pid to ``sleep``. With identity: the start time and command line of the dead server."""
    servers = tmp_path / "state" / "servers"
    servers.mkdir(parents=True, exist_ok=True)
    spec = LaunchSpec(name="old", engine="venv", model="/models/m", port=free_port())
    record: dict[str, object] = {
        "name": "old",
        "spec": spec.model_dump(mode="json"),
        "argv": VLLM_ARGV,
        "pid": pid,
        "log_path": str(tmp_path / "state" / "logs" / "old.log"),
        "started_at": "2026-01-01T00:00:00Z",
    }
    if with_identity:
        record["process"] = {"create_time": psutil.Process(pid).create_time() - 3600.0, "cmdline": VLLM_ARGV}
    path = servers / "old.json"
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize("with_identity", [True, False], ids=["record-with-identity", "older-record"])
def test_status_says_stale_and_down_never_signals(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    unrelated_sleep: subprocess.Popen[bytes],
    with_identity: bool,
) -> None:
    path = _write_record(tmp_path, unrelated_sleep.pid, with_identity=with_identity)
    code, out, err = run_cli(["status", "--json"], capsys)
    assert code == 0, err
    status = json.loads(out)[0]
    assert status["state"] == "stale", status
    assert "another program" in status["note"]
    code, out, err = run_cli(["status"], capsys)
    assert code == 0 and "stale" in out + err

    code, out, err = run_cli(["down", "old"], capsys)
    assert code == 0, err
    assert "stale" in out
    time.sleep(0.3)
    assert unrelated_sleep.poll() is None, "down signalled a process llmdeck did not start"
    assert psutil.Process(unrelated_sleep.pid).status() != psutil.STATUS_ZOMBIE
    assert not path.exists()  # the stale record is forgotten


def test_stop_process_group_checks_identity_before_signalling(
    unrelated_sleep: subprocess.Popen[bytes],
) -> None:
    from llmdeck.engines.process import ProcessIdentity, identify, pid_owner, stop_process_group

    ident = identify(unrelated_sleep.pid)
    assert ident is not None and ident.cmdline == ["sleep", "300"]
    wrong = ProcessIdentity(create_time=ident.create_time - 100, cmdline=ident.cmdline)
    assert pid_owner(unrelated_sleep.pid, wrong) == "other"
    assert ident.since_boot is not None  # Linux: the start tick is what is compared
    wrong = ident.model_copy(update={"since_boot": ident.since_boot - 100})  # same clock time, another start
    assert pid_owner(unrelated_sleep.pid, wrong) == "other"
    assert stop_process_group(unrelated_sleep.pid, grace_s=1, identity=wrong) == "stale"
    assert unrelated_sleep.poll() is None
    # the process llmdeck really started (its identity matches) is stopped
    assert pid_owner(unrelated_sleep.pid, ident) == "ours"
    assert stop_process_group(unrelated_sleep.pid, grace_s=5, identity=ident) == "stopped"
    assert unrelated_sleep.wait(5) is not None


def test_a_clock_step_after_the_start_does_not_make_a_live_server_a_stranger(
    unrelated_sleep: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel's boot time follows the wall clock: in a clean clone's `make test` it moved 31 s
    mid-run (a paused VM resynced), every running server's psutil create_time with it, and `down`
    judged the servers another program's: it forgot them running (~3 GB each). The start tick is
    compared instead."""
    import psutil._pslinux as pslinux

    from llmdeck.engines.process import identify, pid_owner, stop_process_group

    ident = identify(unrelated_sleep.pid)
    assert ident is not None
    stepped = pslinux.boot_time() + 31
    monkeypatch.setattr(pslinux, "boot_time", lambda: stepped)
    assert abs(psutil.Process(unrelated_sleep.pid).create_time() - ident.create_time) > 30  # as it was seen
    assert pid_owner(unrelated_sleep.pid, ident) == "ours"
    assert stop_process_group(unrelated_sleep.pid, grace_s=5, identity=ident) == "stopped"
    assert unrelated_sleep.wait(5) is not None


def test_a_new_up_replaces_a_stale_record(tmp_path: Path, unrelated_sleep: subprocess.Popen[bytes]) -> None:
    from llmdeck.runtime.launcher import is_alive
    from llmdeck.runtime.state import StateStore

    _write_record(tmp_path, unrelated_sleep.pid, with_identity=True)
    record = StateStore(tmp_path / "state" / "servers").load("old")
    assert not is_alive(record)  # so `up --name old` may start again, and nothing is signalled
    assert unrelated_sleep.poll() is None


def test_logs_follow_of_a_stale_record_ends(tmp_path: Path, unrelated_sleep: subprocess.Popen[bytes]) -> None:
    """`logs -f` follows until the server exits; a pid reused by `sleep 300` is not the server."""
    from security_helpers import run_llmdeck

    _write_record(tmp_path, unrelated_sleep.pid, with_identity=True)
    log = tmp_path / "state" / "logs" / "old.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("# llmdeck: header\nlast line\n")
    proc = run_llmdeck(tmp_path, "logs", "old", "-f", timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert "last line" in proc.stdout
    assert unrelated_sleep.poll() is None


def test_ctrl_c_in_a_finalizer_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    """Seen once in five Ctrl-Cs of a bench: asyncio's SIGINT handler landed in a weakref callback and
    Python printed "Exception ignored in ... Traceback ... KeyboardInterrupt" beside "Interrupted"."""
    import gc
    import sys

    from llmdeck.cli.app import _quiet_interrupts

    seen: list[object] = []

    class Interrupted:
        def __del__(self) -> None:
            raise KeyboardInterrupt

    class Broken:
        def __del__(self) -> None:
            raise ValueError("a real bug in a finalizer")

    hook = sys.unraisablehook
    sys.unraisablehook = _quiet_interrupts(seen.append)
    try:
        Interrupted()
        Broken()
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert [type(u.exc_value).__name__ for u in seen] == ["ValueError"]  # type: ignore[attr-defined]
