"""`cluster up --local` says when it started Ray's head again on another picked client-server port, as
tune and quickstart say it of theirs: an event the CLI renders on stderr (it had retried silently, and
the port in `ps` differed from the one first picked with no word why). Ray here is a tiny fake
(``fake_ray.py``): its head says ready as Ray does, then binds the client-server port or dies as Ray's
client server does when it is taken; its `status` prints a real `ray status` of one node."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.cluster import local
from repo_paths import TEST_FIXTURES

FAKE_RAY = """
import socket, sys, time
if sys.argv[1] == "status":
    print(open(STATUS, encoding="utf-8").read())
    sys.exit(0)
port = int(sys.argv[sys.argv.index("--ray-client-server-port") + 1])
print("INFO scripts.py:1266 -- This command will now block forever until terminated by a signal.", flush=True)
time.sleep(0.3)
sock = socket.socket()
try:
    sock.bind(("127.0.0.1", port))
except OSError:
    print(f"RuntimeError: Failed to bind to address 127.0.0.1:{port} (Address already in use)", flush=True)
    sys.exit(1)
sock.listen()
time.sleep(600)
"""


def _free() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another program holds (listening), llmdeck's first pick."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def state(tmp_path: Path, taken: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    status = TEST_FIXTURES / "cluster" / "ray-2.60.0-status-head-only.txt"
    script = tmp_path / "fake_ray.py"
    script.write_text(f"STATUS = {str(status)!r}\n" + FAKE_RAY, encoding="utf-8")
    monkeypatch.setattr(local, "ray_command", lambda: [sys.executable, str(script)])
    picks = iter([taken])
    monkeypatch.setattr(local, "free_port", lambda: next(picks, None) or _free())
    state_dir = tmp_path / "state"
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(state_dir))
    try:
        yield state_dir
    finally:
        local.stop(state_dir, grace=2)


def test_the_library_tells_the_clash_to_its_events(state: Path, taken: int) -> None:
    seen: list[local.ClusterEvent] = []
    cluster = local.start(state, port=_free(), workers=0, timeout=20, events=seen.append)
    head = cluster.nodes[0]
    client = int(head.argv[head.argv.index("--ray-client-server-port") + 1])
    [event] = seen
    assert event.kind == "port_clash" and event.data == {"port": taken, "next_port": client}


def test_cluster_up_local_says_on_stderr_that_it_started_again_on_another_port(
    state: Path, taken: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["cluster", "up", "--head", "127.0.0.1", "--port", str(_free()), "--step-timeout", "20"]
    code, out, err = run_cli(args, capsys)
    flat = " ".join(err.split())
    assert code == 0, err
    assert f"port {taken} was taken by another program" in flat and "starting the head again" in flat
    assert "1 of 1 nodes alive" in " ".join(out.split()) and "was taken" not in out
