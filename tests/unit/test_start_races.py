"""`up`, `down` and `down --all` of one server at once: no record lost or left behind, and each says what
happened. The window is driven by a hook (no timing luck): the start's readiness poll (or the attached
up's pause, or the list of `down --all`) runs the other command before it goes on.

The engine is fake_loading_engine_races (a shell script that sleeps, standing in for the venv's python):
a real process in its own group, stopped as `down` stops vLLM.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from cli_helpers import run_cli
from llmdeck.engines.process import identify
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import ServerStartError, StartStopped
from llmdeck.runtime import launcher, service
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.settings import Settings
from llmdeck.util.net import free_port
from security_helpers import fake_model_dir


def _settings(tmp: Path) -> Settings:
    return Settings(state_dir=tmp / "state", cache_dir=tmp / "cache")


def _started(tmp: Path, settings: Settings) -> ServerRecord:
    """A server of the fake engine started and recorded, not yet ready (never: it only sleeps)."""
    engine = tmp / "fake_loading_engine_races.sh"
    engine.write_text("#!/bin/sh\nexec sleep 300\n")
    engine.chmod(0o755)
    spec = LaunchSpec(
        name="coder", engine="venv", python=str(engine), model=str(fake_model_dir(tmp)), port=free_port()
    )
    return service.start(spec, settings, service.UpOptions.bare(timeout_s=30))


def _at_first_poll(monkeypatch: pytest.MonkeyPatch, other: Callable[[], None], answers: bool) -> None:
    """The start's first readiness poll runs ``other`` (the command in the other shell), then answers."""
    done: list[bool] = []

    def poll(client: httpx.Client, base_url: str) -> bool:
        if not done:
            done.append(True)
            other()
        return answers

    monkeypatch.setattr(launcher, "_answers", poll)


def test_a_down_while_up_waits_is_named_by_the_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`llmdeck down coder` while `llmdeck up coder` waited: the up said "exited before it was ready; no
    known cause matched its log" (exit 1), as if it had crashed. It names the down now."""
    settings = _settings(tmp_path)
    record = _started(tmp_path, settings)
    _at_first_poll(monkeypatch, lambda: print(launcher.down("coder", settings)), answers=False)
    with pytest.raises(StartStopped) as exc:
        service.await_ready(record, settings, service.UpOptions.bare(timeout_s=30))
    assert "stopped by `llmdeck down`" in exc.value.message
    assert (
        "# llmdeck: " in record.log_path.read_text()
        and " stopping: `llmdeck down`" in record.log_path.read_text()
    )
    assert not StateStore(settings.servers_dir).path("coder").exists()


def test_a_down_as_up_sees_ready_leaves_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`down` between the start's last poll and its saving of the ready record: the start saved the
    record again (of a stopped server) and said "ready"."""
    settings = _settings(tmp_path)
    record = _started(tmp_path, settings)
    _at_first_poll(monkeypatch, lambda: print(launcher.down("coder", settings)), answers=True)
    monkeypatch.setattr(launcher, "_listens", lambda record: None)
    with pytest.raises(ServerStartError):  # it had returned the record, "ready"
        service.await_ready(record, settings, service.UpOptions.bare(timeout_s=30))
    assert not StateStore(settings.servers_dir).path("coder").exists()


def test_a_failed_start_keeps_a_newer_starts_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`down coder`, then a new `up coder` that recorded its server, while the first `up coder` still
    waited: the first one's clean-up removed the record by name, the new server left running unknown
    to `status` and `down`."""
    settings = _settings(tmp_path)
    record = _started(tmp_path, settings)
    store = StateStore(settings.servers_dir)
    newer = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        renewed = record.model_copy(update={"pid": newer.pid, "process": identify(newer.pid)})

        def down_and_up_again() -> None:
            launcher.down("coder", settings)
            store.save(renewed)

        _at_first_poll(monkeypatch, down_and_up_again, answers=False)
        with pytest.raises(ServerStartError):
            service.await_ready(record, settings, service.UpOptions.bare(timeout_s=30))
        assert store.load("coder").pid == newer.pid, "the newer start's record was removed"
        assert newer.poll() is None, "the newer start's server was stopped"
    finally:
        newer.kill()
        newer.wait()


def test_an_attached_server_stopped_by_down_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`llmdeck down coder` in another shell while `llmdeck up --attach` followed it: the attached up
    said "exited by itself" (exit 1) of a server stopped as asked."""
    from llmdeck.engines import logfiles
    from llmdeck.runtime import attach

    settings = _settings(tmp_path)
    record = _started(tmp_path, settings)
    real_sleep = logfiles.time.sleep
    done: list[bool] = []

    def first_pause_runs_down(seconds: float) -> None:
        if not done:
            done.append(True)
            launcher.down("coder", settings)
        real_sleep(seconds)

    monkeypatch.setattr(logfiles.time, "sleep", first_pause_runs_down)  # the follower's pause
    written: list[str] = []
    attach.follow(record, settings, written.append)  # returns: no OperationError
    assert "coder: stopped by `llmdeck down`" in "".join(written)


def test_down_all_goes_on_past_a_server_stopped_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two `down --all` at once: the second listed s1 and s2, the first stopped s1 meanwhile, and the
    second ended on "No server named 's1' is known" (exit 2), s2 left to the other."""
    settings = _settings(tmp_path)
    store = StateStore(settings.servers_dir)
    ended = subprocess.Popen(["true"])
    ended.wait()
    for name in ("s1", "s2"):
        spec = LaunchSpec(name=name, engine="cpu", model=str(tmp_path), port=free_port())
        store.save(ServerRecord(name=name, spec=spec, argv=["x"], pid=ended.pid, log_path=tmp_path / "x.log"))
    real_list = StateStore.list

    def listed_then_s1_stopped(self: StateStore) -> list[ServerRecord]:
        records = real_list(self)
        self.remove("s1")  # the other `down --all`, between this one's list and its stop
        return records

    monkeypatch.setattr(StateStore, "list", listed_then_s1_stopped)
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(settings.state_dir))
    # no drain: its own look at the servers would come first and take the list the race is staged on
    code, out, err = run_cli(["down", "--all", "--drain", "0"], capsys)
    assert code == 0, err
    assert "s1: gone" in out and "s2: gone" in out
    assert not store.path("s2").exists()


def test_down_all_waits_for_a_start_between_its_spawn_and_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`down --all` while an `up` had spawned its engine but not yet saved its record: "nothing to
    stop", and the server recorded a moment later ran on. The start here holds the start lock as
    start_background does, and saves its record once `down --all` waits for that lock."""
    import threading

    from llmdeck.runtime import start_gate
    from llmdeck.util import filelock

    settings = _settings(tmp_path)
    store = StateStore(settings.servers_dir)
    ended = subprocess.Popen(["true"])
    ended.wait()
    spec = LaunchSpec(name="w", engine="cpu", model=str(tmp_path), port=free_port())
    record = ServerRecord(name="w", spec=spec, argv=["x"], pid=ended.pid, log_path=tmp_path / "w.log")
    holding, down_waits = threading.Event(), threading.Event()
    real_wait = filelock._wait_for

    def wait_for(*args: object, **kwargs: object) -> None:
        if threading.current_thread() is threading.main_thread():
            down_waits.set()
        real_wait(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(filelock, "_wait_for", wait_for)

    def start() -> None:
        with start_gate.start_lock(settings):
            holding.set()
            down_waits.wait(5)  # the engine spawned; the record saved once `down --all` waits
            store.save(record)

    starting = threading.Thread(target=start)
    starting.start()
    holding.wait(5)
    try:
        assert launcher.down_all(settings) == {"w": "gone"}
    finally:
        starting.join(10)
    assert not store.path("w").exists()


def test_clearing_a_dead_record_keeps_a_record_saved_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `up coder` after coder had crashed: each cleared the dead record (its leftovers stopped,
    then the record removed by name), and the slower one removed the record the faster one had just
    saved for its new server, which ran on unknown to `status` and `down`."""
    from llmdeck.engines.local import CpuEngine
    from llmdeck.runtime import start_gate

    settings = _settings(tmp_path)
    store = StateStore(settings.servers_dir)
    ended = subprocess.Popen(["true"])
    ended.wait()
    spec = LaunchSpec(name="coder", engine="cpu", model=str(tmp_path), port=free_port())
    dead = ServerRecord(name="coder", spec=spec, argv=["x"], pid=ended.pid, log_path=tmp_path / "c.log")
    store.save(dead)
    newer = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        renewed = dead.model_copy(update={"pid": newer.pid, "process": identify(newer.pid)})
        real_stop = CpuEngine.stop

        def stop_while_the_other_up_records(self: CpuEngine, handle: ServerRecord, **kw: float) -> str:
            outcome = real_stop(self, handle, **kw)
            store.save(renewed)  # the other `up coder`, past its own clearing, records its server
            return outcome

        monkeypatch.setattr(CpuEngine, "stop", stop_while_the_other_up_records)
        assert start_gate.forget_dead(store, "coder") == ("gone", 0)
        assert store.load("coder").pid == newer.pid, "the other start's record was removed"
    finally:
        newer.kill()
        newer.wait()
