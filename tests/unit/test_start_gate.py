"""The start gate: a record of a server that died makes room for the next start of its name, its
leftovers stopped as `down` stops them.

Real processes here: a leader in a session of its own (as the engines start vLLM) with a child in its
group standing for vLLM's EngineCore, which outlives a `kill -9` of the API server (measured on the CPU
engine: evidence/lifecycle/results/dead_leader_cpu.txt).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from llmdeck.engines.process import identify, spawn_detached
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import AlreadyExistsError
from llmdeck.runtime import start_gate
from llmdeck.runtime.state import ServerRecord, StateStore

LEADER = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def record_of(pid: int, tmp_path: Path) -> ServerRecord:
    spec = LaunchSpec(name="dl", engine="cpu", model=str(tmp_path), port=18999)
    return ServerRecord(
        name="dl", spec=spec, argv=["x"], pid=pid, process=identify(pid), log_path=tmp_path / "dl.log"
    )


def test_a_dead_leaders_surviving_group_is_stopped_before_the_next_start(tmp_path: Path) -> None:
    """`kill -9` of vLLM's API server leaves its EngineCore serving nothing and holding the memory (the
    GPU's, on a GPU): the next `up` of the name had dropped the record and started beside it."""
    leader = spawn_detached([sys.executable, "-c", LEADER], subprocess.PIPE, os.environ)  # as engines do
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    store = StateStore(tmp_path / "servers")
    store.save(record_of(leader.pid, tmp_path))
    try:
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        assert psutil.pid_exists(child) and os.getpgid(child) == leader.pid  # the orphan lives on
        assert start_gate.forget_dead(store, "dl") == ("gone", 1)  # the orphan, named in the event
        # at once: it returns when the process has exited (the GPU's memory back before preflight)
        alive = psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE
        assert not alive, "the dead server's surviving process was left running"
        assert not store.path("dl").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)


def test_a_live_server_refuses_the_start(tmp_path: Path) -> None:
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    store = StateStore(tmp_path / "servers")
    store.save(record_of(leader.pid, tmp_path))
    try:
        with pytest.raises(AlreadyExistsError, match="already running"):
            start_gate.forget_dead(store, "dl")
        assert leader.poll() is None and store.path("dl").exists()
    finally:
        leader.kill()
        leader.wait()


class _Stop(Exception):
    pass


def test_up_clears_a_dead_servers_leftovers_before_preflight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preflight counts GPU tenants: the dead server's EngineCore, still holding the GPU, had been one
    (a blocking finding, or a start sized beside it) since it was cleared only at the launch."""
    from llmdeck.runtime import service
    from llmdeck.settings import Settings
    from llmdeck.util.net import free_port
    from repo_paths import ROOT

    model = tmp_path / "model"
    model.mkdir()
    config = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3-0.6B.config.json"
    (model / "config.json").write_text(config.read_text())
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    leader = spawn_detached([sys.executable, "-c", LEADER], subprocess.PIPE, os.environ)  # as engines do
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    StateStore(settings.servers_dir).save(record_of(leader.pid, tmp_path))
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait()
    seen: dict[str, bool] = {}

    def preflight(*_: object) -> None:
        proc = psutil.Process(child) if psutil.pid_exists(child) else None
        seen["orphan_alive"] = proc is not None and proc.status() != psutil.STATUS_ZOMBIE
        raise _Stop

    monkeypatch.setattr(service, "preflight", preflight)
    events: list[str] = []
    spec = LaunchSpec(name="dl", engine="venv", python=sys.executable, model=str(model), port=free_port())
    try:
        with pytest.raises(_Stop):
            service.start(spec, settings, clock=service.EventClock(lambda e: events.append(e.message)))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
    assert seen == {"orphan_alive": False}
    assert events[0].startswith("dl had died; 1 of its processes lived on")  # it had said 'gone'
