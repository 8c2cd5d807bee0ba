"""`cluster up --local`: Ray's client-server port is one llmdeck picked (``free_port``), and another
program could take it before Ray bound it. Ray's client server then died a second after `ray start`
said "block forever", the head with it, and llmdeck had recorded the cluster as up. Now the head must
listen on that port; a taken one starts the head again on another picked port (runtime/portpick's
rule). The head here is a tiny fake Ray (``fake_ray_head.py``), not Ray: it says ready as Ray does,
then binds the client-server port (or dies as Ray's client server does when it is taken)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmdeck.cluster import local
from llmdeck.cluster.commands import RayOptions
from llmdeck.errors import OperationError

FAKE_RAY_HEAD = """
import socket, sys, time
port = int(sys.argv[sys.argv.index("--ray-client-server-port") + 1])
print("INFO scripts.py:1266 -- This command will now block forever until terminated by a signal.", flush=True)
time.sleep(0.3)
sock = socket.socket()
try:
    sock.bind(("127.0.0.1", port))
except OSError:
    print(f"RuntimeError: Failed to bind to address 127.0.0.1:{port} (Address already in use)", flush=True)
    print("ERR scripts.py:1307 -- Some Ray subprocesses exited unexpectedly", flush=True)
    sys.exit(1)
sock.listen()
time.sleep(600)
"""


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another program holds (listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def fake_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake_ray_head.py"
    script.write_text(FAKE_RAY_HEAD, encoding="utf-8")
    monkeypatch.setattr(local, "ray_command", lambda: [sys.executable, str(script)])
    return tmp_path / "state"


def _free() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_picked_client_port_taken_before_ray_binds_it_starts_the_head_on_another(
    fake_ray: Path, taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([taken])
    monkeypatch.setattr(local, "free_port", lambda: next(picks, None) or _free())
    try:
        cluster = local.start(fake_ray, port=_free(), workers=0, timeout=20)
        head = cluster.nodes[0]
        client = int(head.argv[head.argv.index("--ray-client-server-port") + 1])
        assert client != taken
        assert local.group_alive(head.pgid) and local._group_listens(head.pgid, client)
    finally:
        local.stop(fake_ray, grace=2)


def test_a_client_port_the_caller_gave_that_is_taken_is_an_error_not_a_cluster_up(
    fake_ray: Path, taken: int
) -> None:
    opts = RayOptions(num_cpus=1, num_gpus=0, object_store_bytes=10**8, client_server_port=taken)
    try:
        with pytest.raises(OperationError, match="exited after it said it was ready"):
            local.start(fake_ray, port=_free(), workers=0, opts=opts, timeout=20)
        assert local.load(fake_ray) is None  # nothing left recorded (nor running)
    finally:
        local.stop(fake_ray, grace=2)
