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
import time
from pathlib import Path

import psutil
import pytest

from llmdeck.engines.process import identify
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
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    store = StateStore(tmp_path / "servers")
    store.save(record_of(leader.pid, tmp_path))
    try:
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        assert psutil.pid_exists(child) and os.getpgid(child) == leader.pid  # the orphan lives on
        start_gate.forget_dead(store, "dl")
        deadline = time.monotonic() + 10
        while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the dead server's surviving process was left running"
            time.sleep(0.05)
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
