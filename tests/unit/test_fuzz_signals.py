"""Fuzz suite, signals: Ctrl-C (SIGINT) and SIGTERM while `up` waits for an engine that never becomes
ready, and while `up --attach` follows one. Each must exit 130 / 143 within a bound, say what it did,
and leave no engine behind (the fake engine's pid is gone, no server record left).

The engine is fake_never_ready_engine (a shell script standing in for the venv's python: it answers
the vLLM version probe, then sleeps): no real vLLM starts here, so no engine lock is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from repo_paths import ROOT
from security_helpers import FAKE_QWEN3_CONFIG

FAKE_NEVER_READY_ENGINE = """#!/bin/sh
# fake_never_ready_engine: answers llmdeck's vLLM version probe, then never becomes ready
if [ "$1" = "-c" ]; then echo "0.22.0"; exit 0; fi
echo "fake engine: starting, never ready"
exec sleep 3600
"""


# fake_stubborn_engine: as fake_never_ready_engine, but it ignores SIGTERM (a busy engine that takes its
# time to stop): `up` waits its grace period, then kills it
FAKE_STUBBORN_ENGINE = FAKE_NEVER_READY_ENGINE.replace("exec sleep", "trap '' TERM\nexec sleep")


def _start(
    tmp: Path, name: str, *extra: str, engine_text: str = FAKE_NEVER_READY_ENGINE
) -> tuple[subprocess.Popen[str], Path]:
    engine = tmp / "fake_never_ready_engine.sh"
    engine.write_text(engine_text)
    engine.chmod(0o755)
    model = tmp / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(FAKE_QWEN3_CONFIG))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMDECK_")}
    env.update(LLMDECK_STATE_DIR=str(tmp / "state"), PYTHONPATH=str(ROOT / "src"), COLUMNS="200")
    from llmdeck.util.net import free_port

    port = free_port()
    argv = [sys.executable, "-m", "llmdeck", "up", "--model", str(model), "--engine", "venv"]
    argv += ["--python", str(engine), "--port", str(port), "--name", name, "--force", *extra]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp / "state" / "logs" / f"{name}.log"
    record = tmp / "state" / "servers" / f"{name}.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # the engine can write its log before `up` has saved its record (seen under load): wait for both
        started = log.is_file() and "never ready" in log.read_text(errors="replace")
        if started and record.is_file():
            return proc, log
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    _out, err = proc.communicate()
    raise AssertionError(f"the fake engine did not start: {err[-2000:]}")


CASES = [
    ("up:sigint-while-starting", signal.SIGINT, 130, "interrupted (ctrl-c)", ()),
    ("up:sigterm-while-starting", signal.SIGTERM, 143, "terminated (sigterm)", ()),
    ("up:sigint-attached", signal.SIGINT, 130, "interrupted (ctrl-c)", ("--attach",)),
    ("up:sigterm-attached", signal.SIGTERM, 143, "terminated (sigterm)", ("--attach",)),
    # a closed terminal: SIGHUP had killed llmdeck outright, the engine (its own session) left running
    ("up:sighup-attached", signal.SIGHUP, 129, "terminated (sighup)", ("--attach",)),
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("cid", "sig", "code", "says", "extra"), CASES, ids=[c[0] for c in CASES])
def test_up_interrupted_exits_with_the_signal_and_stops_the_engine(
    cid: str, sig: signal.Signals, code: int, says: str, extra: tuple[str, ...], tmp_path: Path
) -> None:
    name = cid.split(":")[1]
    proc, _log = _start(tmp_path, name, *extra)
    record = tmp_path / "state" / "servers" / f"{name}.json"
    engine_pid = json.loads(record.read_text())["pid"]
    t0 = time.monotonic()
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - t0
    flat = " ".join(err.split()).lower()
    assert proc.returncode == code, err[-2000:]
    assert says in flat and "traceback" not in flat and " bug" not in flat, err[-2000:]
    assert "stopped" in flat, err[-2000:]  # what was done: the engine stopped, its log kept
    assert elapsed < 30, f"took {elapsed:.1f} s"
    time.sleep(0.5)
    alive = psutil.pid_exists(engine_pid) and psutil.Process(engine_pid).status() != psutil.STATUS_ZOMBIE
    assert not alive, f"the engine (pid {engine_pid}) still runs"
    assert not record.exists(), "the server record of a stopped start is left behind"


@pytest.mark.timeout(180)
def test_a_second_ctrl_c_while_up_stops_the_engine_does_not_leave_it_running(tmp_path: Path) -> None:
    """Ctrl-C twice (or `timeout` passing on the SIGINT the terminal already sent the group): the second
    one had broken off the stop, and the engine ran on after "Interrupted"; now it is held until the
    engine is gone (its grace period, then SIGKILL)."""
    proc, _log = _start(tmp_path, "twice", engine_text=FAKE_STUBBORN_ENGINE)
    record = tmp_path / "state" / "servers" / "twice.json"
    engine_pid = json.loads(record.read_text())["pid"]
    proc.send_signal(signal.SIGINT)
    time.sleep(2)  # `up` is in its stop now: the engine ignores SIGTERM for the 10 s grace
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    flat = " ".join(err.split()).lower()
    time.sleep(0.5)
    alive = psutil.pid_exists(engine_pid) and psutil.Process(engine_pid).status() != psutil.STATUS_ZOMBIE
    if alive:
        psutil.Process(engine_pid).kill()
    assert not alive, f"the engine (pid {engine_pid}) still runs after a second Ctrl-C: {err[-2000:]}"
    assert not record.exists(), "the server record of a stopped start is left behind"
    assert proc.returncode == 130, err[-2000:]
    assert "traceback" not in flat and "still stopping the engine" in flat, err[-2000:]
