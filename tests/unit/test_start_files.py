"""What a start writes, checked before the engine is spawned, and an engine never left without a record
(the runtime service with a fake_loading_engine: a shell script that sleeps, standing in for the venv's
python)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psutil
import pytest

from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import LlmdeckError
from llmdeck.runtime import service
from llmdeck.settings import Settings
from llmdeck.util.net import free_port
from security_helpers import fake_model_dir


def _engine(tmp: Path) -> Path:
    path = tmp / "fake_loading_engine_files.sh"
    path.write_text("#!/bin/sh\nexec sleep 300\n")
    path.chmod(0o755)
    return path


def _alive(tmp: Path) -> list[int]:
    marker = str(tmp / "fake_loading_engine_files.sh")
    return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def _spec(tmp: Path) -> LaunchSpec:
    model = str(fake_model_dir(tmp))
    return LaunchSpec(name="x", engine="venv", python=str(_engine(tmp)), model=model, port=free_port())


def _up(tmp: Path, settings: Settings) -> LlmdeckError:
    with pytest.raises(LlmdeckError) as exc:
        service.up(_spec(tmp), settings, service.UpOptions.bare(timeout_s=1))
    return exc.value


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        (lambda s: (s / "servers").write_text("x"), "is a file"),  # NotADirectoryError after the spawn
        (lambda s: (s / "logs").write_text("x"), "is a file"),  # FileExistsError
        (
            lambda s: [(s / "logs").mkdir(), (s / "logs/x.log").write_text(""), (s / "logs/x.log.3").mkdir()],
            "x.log.3",
        ),
    ],
    ids=["servers-a-file", "logs-a-file", "old-log-a-folder"],
)
def test_a_state_folder_that_cannot_take_the_files_is_exit_2_before_any_engine(
    tmp_path: Path, setup: object, words: str
) -> None:
    """These had been internal errors, one after the engine was spawned: it ran on with no record."""
    state = tmp_path / "state"
    state.mkdir()
    setup(state)  # type: ignore[operator]
    error = _up(tmp_path, Settings(state_dir=state, cache_dir=tmp_path / "cache"))
    assert error.exit_code == 2 and words in error.message
    assert _alive(tmp_path) == []


def test_a_record_that_cannot_be_saved_stops_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.runtime.state import StateStore

    def no_room(self: StateStore, record: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(StateStore, "save", no_room)
    with pytest.raises(OSError, match="No space"):
        service.up(
            _spec(tmp_path), Settings(state_dir=tmp_path / "state"), service.UpOptions.bare(timeout_s=1)
        )
    assert _alive(tmp_path) == []


def test_a_linked_logs_folder_keeps_its_owners_mode(tmp_path: Path) -> None:
    """`up` had chmod-ed the link's target to 0700: a shared 1777 folder lost its sticky bit."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    state = tmp_path / "state"
    state.mkdir()
    os.symlink(shared, state / "logs")
    _up(tmp_path, Settings(state_dir=state, cache_dir=tmp_path / "cache"))  # not ready in 1 s: stopped
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert _alive(tmp_path) == []


@pytest.mark.parametrize("same", ["name", "port"])
def test_two_starts_at_once_one_is_refused(tmp_path: Path, same: str) -> None:
    """Two `up` of one name at once had both spawned (one engine left unrecorded); of one port, the second
    had reported ready on the first's /health. From check to record a start holds a lock now."""
    import threading

    from llmdeck.errors import AlreadyExistsError, PortInUseError

    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    first = _spec(tmp_path)
    second = first.model_copy(update={"name": "x" if same == "name" else "y"})
    errors: list[Exception] = []

    def start(spec: LaunchSpec) -> None:
        try:
            service.up(spec, settings, service.UpOptions.bare(timeout_s=2))
        except Exception as exc:  # collected, then checked
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    refused = AlreadyExistsError if same == "name" else PortInUseError
    assert sum(isinstance(e, refused) for e in errors) == 1, errors
    assert _alive(tmp_path) == []


def test_a_name_already_running_is_refused_before_anything_is_done(tmp_path: Path) -> None:
    """It had said "starting x … on port N" (and dropped the model's page cache) before refusing."""
    import subprocess
    import sys

    from llmdeck.engines.process import identify, spawn_detached
    from llmdeck.errors import AlreadyExistsError
    from llmdeck.runtime.state import ServerRecord, StateStore

    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = _spec(tmp_path)
    live = spawn_detached(
        [sys.executable, "-c", "import time; time.sleep(60)"], subprocess.DEVNULL, os.environ
    )
    try:
        StateStore(settings.servers_dir).save(
            ServerRecord(
                name="x", spec=spec, argv=list(live.args), pid=live.pid,  # type: ignore[arg-type]
                process=identify(live.pid), log_path=tmp_path / "x.log",
            )
        )  # fmt: skip
        events: list[str] = []
        with pytest.raises(AlreadyExistsError, match="already running"):
            service.up(
                spec, settings, service.UpOptions.bare(timeout_s=2), events=lambda e: events.append(e.kind)
            )
        assert "starting" not in events and live.poll() is None
    finally:
        live.kill()
