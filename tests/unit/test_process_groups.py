"""Stopping an engine's process group (engines/process.py) when its leader is already gone: a real
process tree (python parent + a child in its group), no engine needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from llmdeck.engines.process import identify, spawn_detached, stop_process_group

# the leader starts a child in its own group (vLLM's API server and its engine core), prints the
# child's pid, then waits
TREE = (
    "import subprocess, sys, time\n"
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
    "print(c.pid, flush=True)\n"
    "time.sleep(300)\n"
)


def test_a_crashed_leaders_engine_core_is_stopped_with_its_group() -> None:
    """The API server killed (-9), vLLM's engine core lived on holding the memory; `down` said "gone"
    and left it running, untracked."""
    leader = spawn_detached([sys.executable, "-c", TREE], subprocess.PIPE, os.environ)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    identity = identify(leader.pid)
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait(10)
    assert psutil.pid_exists(child)
    try:
        assert stop_process_group(leader.pid, grace_s=2, identity=identity) == "gone"
        deadline = time.monotonic() + 10
        while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the leader's child outlived the stop"
            time.sleep(0.05)
    finally:
        if psutil.pid_exists(child):
            os.kill(child, signal.SIGKILL)
