"""Stopping an engine's process group (engines/process.py) when its leader is already gone: a real
process tree (python parent + a child in its group), no engine needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

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


@pytest.mark.parametrize("mark", ["0123456789abcdef", None], ids=["another-starts-mark", "no-mark-recorded"])
def test_a_dead_leaders_group_id_taken_by_another_program_is_left_alone(mark: str | None) -> None:
    """The recorded pid dead, its number taken by a program that led a group and exited (`a & b &` in
    a script): `down` SIGKILLed that program's processes, found by the group id alone."""
    script = "sleep 301 & sleep 302 & echo $$; exit 0"
    other = subprocess.Popen(
        ["bash", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert other.stdout is not None
    group = int(other.stdout.readline())
    other.wait(10)
    members = [p for p in psutil.process_iter(["pid"]) if _group_of(p.pid) == group]
    assert len(members) == 2  # its leader gone, its two sleeps live on in its group
    server = identify(os.getpid())
    assert server is not None
    recorded = server.model_copy(update={"group_mark": mark})
    try:
        assert stop_process_group(group, grace_s=1, identity=recorded) == "gone"
        assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in members)
    finally:
        for proc in members:
            proc.kill()


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_the_gateway_stops_only_the_servers_it_started(tmp_path: Path) -> None:
    """`gateway down` stopped every server named like one of its models: a user's own `llmdeck up --name
    coder` was killed and its record removed."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.gateway.lifecycle import stop
    from llmdeck.runtime.state import ServerRecord, StateStore
    from llmdeck.settings import Settings

    settings = Settings(state_dir=tmp_path / "state")
    store = StateStore(settings.servers_dir)
    procs = {}
    for name, by in (("mine", "up"), ("its", "gateway")):
        proc = spawn_detached(
            [sys.executable, "-c", "import time; time.sleep(300)"], subprocess.DEVNULL, os.environ
        )
        procs[name] = proc
        spec = LaunchSpec(name=name, model="/models/m", port=18000 + len(procs))
        store.save(
            ServerRecord(
                name=name, spec=spec, argv=proc.args, pid=proc.pid, process=identify(proc.pid),  # type: ignore[arg-type]
                log_path=Path(tmp_path / f"{name}.log"), started_by=by,  # type: ignore[arg-type]
            )
        )  # fmt: skip
    try:
        assert "left running" in stop("mine", settings) and procs["mine"].poll() is None
        assert store.path("mine").exists()
        stop("its", settings)
        assert procs["its"].wait(10) is not None and not store.path("its").exists()
    finally:
        for proc in procs.values():
            proc.kill()


def test_ready_means_this_engines_own_processes_listen_on_its_port(tmp_path: Path) -> None:
    """Another server answering /health on the port (started a moment earlier) had made `up` say ready
    while this engine failed to bind and died: readiness asks whose socket it is."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.launcher import _listens
    from llmdeck.runtime.state import ServerRecord
    from llmdeck.util.net import free_port

    port = free_port()
    serve = (
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"
    )
    proc = spawn_detached([sys.executable, "-c", serve], subprocess.DEVNULL, os.environ)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            c.laddr.port == port for c in psutil.Process(proc.pid).net_connections(kind="inet")
        ):
            time.sleep(0.05)

        def record(port_: int) -> ServerRecord:
            spec = LaunchSpec(name="l", model="/models/m", port=port_)
            return ServerRecord(name="l", spec=spec, argv=[], pid=proc.pid, log_path=tmp_path / "l.log")

        assert _listens(record(port)) is True
        assert _listens(record(free_port())) is False
    finally:
        proc.kill()


def test_ctrl_c_during_the_grace_kills_the_group_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that does not end on SIGTERM (vLLM draining for its --shutdown-timeout, or holding its
    connections): Ctrl-C while `down` waits out the grace had left it SIGTERMed and running."""
    from llmdeck.engines import process

    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True)\n"
    code += "time.sleep(300)"
    leader = spawn_detached([sys.executable, "-c", code], subprocess.PIPE, os.environ)
    assert leader.stdout is not None and leader.stdout.readline()  # its handler is set
    identity = identify(leader.pid)

    def ctrl_c(pid: int) -> None:  # the first look in the grace: the user presses Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(process, "_reap", ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            stop_process_group(leader.pid, grace_s=60, identity=identity)
        assert leader.wait(10) == -signal.SIGKILL
    finally:
        if leader.poll() is None:
            leader.kill()
