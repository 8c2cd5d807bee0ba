"""Two llmdeck commands on one piece of state at once: each one's change is kept.

Each test pauses the first writer between its read and its write (a monkeypatched hook, no race on
timings), lets the second run meanwhile, then lets the first write: without a lock the second's change
was written over by the first's stale copy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SECOND_GETS_THROUGH_S = 1.0  # how long the paused first writer gives the second to finish


def _interleave(pause_in: Any, attr: str, first: Callable[[], object], second: Callable[[], object]) -> None:
    """Run ``first`` until it calls ``pause_in.attr`` (its write), run ``second`` in another thread and
    give it a second to finish (it can't while ``first`` holds a lock), then let ``first`` write."""
    real = getattr(pause_in, attr)
    paused = threading.local()
    errors: list[BaseException] = []

    def run_second() -> None:
        try:
            second()
        except BaseException as exc:  # reported below
            errors.append(exc)

    other = threading.Thread(target=run_second, daemon=True)

    def hook(*args: Any, **kwargs: Any) -> Any:
        if not getattr(paused, "done", False) and threading.current_thread() is threading.main_thread():
            paused.done = True
            other.start()
            other.join(SECOND_GETS_THROUGH_S)  # unlocked it writes now; locked it waits for us
        return real(*args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(pause_in, attr, hook)
    try:
        first()
        other.join(30)
    finally:
        mp.undo()
    assert not other.is_alive(), "the second writer never finished"
    assert errors == []


def test_two_key_creates_at_once_keep_both_keys(tmp_path: Path) -> None:
    """Two `keys create` at once: both printed a key, one of them was not in the file (lost)."""
    from llmdeck.gateway.keys import KeyStore

    path = tmp_path / "gateway" / "keys.json"
    KeyStore(path).create("seed")
    _interleave(
        KeyStore,
        "save",
        lambda: KeyStore(path).create("alice"),
        lambda: KeyStore(path).create("bob"),
    )
    assert sorted(k.name for k in KeyStore(path).load().keys) == ["alice", "bob", "seed"]


def test_a_revoke_during_a_create_stays_revoked(tmp_path: Path) -> None:
    """`keys revoke` while a `keys create` ran: the create wrote the revoked key back (still valid)."""
    from llmdeck.gateway.keys import KeyStore

    path = tmp_path / "gateway" / "keys.json"
    KeyStore(path).create("mallory")
    _interleave(
        KeyStore,
        "save",
        lambda: KeyStore(path).create("alice"),
        lambda: KeyStore(path).revoke("mallory"),
    )
    assert [k.name for k in KeyStore(path).load().keys] == ["alice"]


def test_two_connects_at_once_keep_both_providers(tmp_path: Path) -> None:
    """Two `connect opencode` at once into one file (another --provider-id each): both said "updated",
    the file held one provider block (the first one's write had read the file before the second's)."""
    import json

    from llmdeck.connect import run
    from llmdeck.connect.configs import ServeInfo

    path = tmp_path / "opencode.json"
    path.write_text('{"theme": "dark"}\n', encoding="utf-8")
    info = ServeInfo(base_url="http://127.0.0.1:9", model="m", max_model_len=65536)
    _interleave(
        run,
        "write_if_changed",
        lambda: run.connect_client("opencode", info, file=path, provider_id="first"),
        lambda: run.connect_client("opencode", info, file=path, provider_id="second"),
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    assert sorted(data["provider"]) == ["first", "second"] and data["theme"] == "dark"


def test_a_gateway_up_during_a_gateway_down_stays_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gateway up` while `gateway down` stopped the old gateway: up recorded its new gateway, then down
    deleted that record; the new gateway served on, unknown to `gateway status` and `gateway down`."""
    from llmdeck.gateway import service
    from llmdeck.settings import Settings
    from llmdeck.util.atomic import atomic_write_json

    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")

    def record(pid: int) -> service.GatewayRecord:
        return service.GatewayRecord(
            pid=pid, host="127.0.0.1", port=4000, config=tmp_path / "g.yaml", log_path=tmp_path / "g.log"
        )

    service.record_path(settings).parent.mkdir(parents=True)
    atomic_write_json(service.record_path(settings), record(4241))  # the old one, being stopped

    def fake_start(*args: object, **kwargs: object) -> service.GatewayRecord:
        new = record(4242)
        atomic_write_json(service.record_path(settings), new)
        return new

    monkeypatch.setattr(service, "_start_locked", fake_start)
    monkeypatch.setattr(service, "validate_port", lambda port: None)
    _interleave(
        service,
        "stop_process_group",
        lambda: service.stop(settings),
        lambda: service.start_background(tmp_path / "g.yaml", "127.0.0.1", 4000, settings, insecure=False),
    )
    kept = service.load_record(settings)
    assert kept is not None and kept.pid == 4242


def test_a_killed_writers_temp_file_is_swept_by_the_next_write(tmp_path: Path) -> None:
    """A SIGKILL between the temp file and the rename had left `.opencode.json.<random>.tmp` in the
    user's folder for ever (the old file intact). Temp files now name their writer's pid; the next write
    of that file removes those of writers no longer running, and nothing else."""
    import os
    import signal
    import subprocess
    import sys

    target = tmp_path / "opencode.json"
    target.write_text("{}")
    code = (
        "import os, signal, pathlib, llmdeck.util.atomic as a\n"
        "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
        f"a.atomic_write_text(pathlib.Path({str(target)!r}), '{{\"new\": 1}}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    (left,) = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert left.startswith(".opencode.json.llmdeck-") and target.read_text() == "{}"
    live = tmp_path / f".opencode.json.llmdeck-{os.getppid()}-x.tmp"  # a writer still running
    other = tmp_path / ".notes.json.llmdeck-1-x.tmp"  # another file's
    for p in (live, other):
        p.write_text("")
    from llmdeck.util import atomic

    atomic.atomic_write_text(target, '{"new": 2}')
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["opencode.json", live.name, other.name])
    assert target.read_text() == '{"new": 2}'
