"""A real Ray cluster on this machine (head + a second worker process), started and stopped by llmdeck;
and the real gloo all-reduce across two local ranks, judged.

Ray is kept small (1 CPU, no GPU, 100 MB object store a node, no dashboard) and always stopped in the
fixture's finalizer, whatever the test did.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.cluster import local
from llmdeck.cluster.netcheck import run_local
from llmdeck.cluster.raystatus import parse_ray_status
from llmdeck.cluster.run import down, status
from llmdeck.cluster.verdict import LinkProfile, judge
from llmdeck.util.net import free_port
from repo_paths import TEST_FIXTURES

pytest.importorskip("ray")
FIX = TEST_FIXTURES / "cluster"
pytestmark = pytest.mark.integration


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    sd = tmp_path / "state"
    yield sd
    local.stop(sd, grace=5.0)  # whatever happened, nothing of ours keeps running


def test_real_ray_status_captures_parse() -> None:
    two = parse_ray_status((FIX / "ray-2.60.0-status-2-nodes.txt").read_text())
    assert two.nodes_alive == 2 and two.pending == [] and two.totals["CPU"] == "0.0/2.0"
    one = parse_ray_status((FIX / "ray-2.60.0-status-head-only.txt").read_text())
    assert one.nodes_alive == 1 and one.totals["object_store_memory"] == "0B/95.37MiB"


def test_local_cluster_up_status_logs_down(
    state_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(state_dir))
    port = free_port()
    t0 = time.monotonic()
    code, out, err = run_cli(
        ["cluster", "up", "--head", "127.0.0.1", "--worker", "localhost", "--port", str(port)], capsys
    )
    started = time.monotonic() - t0
    assert code == 0, err
    assert "2 of 2 nodes alive" in out
    rec = local.load(state_dir)
    assert rec is not None and [n.role for n in rec.nodes] == ["head", "worker1"]
    assert all(local.group_alive(n.pgid) for n in rec.nodes)
    kind, address, st = status(state_dir)
    assert (kind, address, st.nodes_alive) == ("local", f"127.0.0.1:{port}", 2)
    assert st.totals["CPU"] == "0.0/2.0"  # 1 CPU a node
    assert st.totals["object_store_memory"] == "0B/190.73MiB"  # 100 MB a node on one machine
    code, _, err = run_cli(["cluster", "up", "--head", "127.0.0.1", "--port", str(port)], capsys)
    assert code == 1 and "already up" in err
    code, out, _ = run_cli(["cluster", "status", "--json"], capsys)
    assert code == 0 and '"nodes_alive": 2' in out
    code, out, _ = run_cli(["cluster", "logs", "-n", "5"], capsys)
    assert code == 0 and "== head" in out and "== worker1" in out and "--block" in out
    kind, seconds = down(state_dir, grace=10.0)
    assert kind == "local" and not any(local.group_alive(n.pgid) for n in rec.nodes)
    assert local.load(state_dir) is None and not Path(rec.temp_dir).exists()  # nothing left in /tmp
    code, _, err = run_cli(["cluster", "down"], capsys)  # again: nothing left, said, and not an error
    assert code == 0 and "No cluster" in err and "nothing to stop" in err
    print(f"ray up {started:.1f} s (2 nodes alive), down {seconds:.1f} s")


def test_real_gloo_allreduce_two_local_ranks() -> None:
    rows, raw = run_local(2, backend="gloo", port=free_port(), timeout=240, env={"GLOO_SOCKET_IFNAME": "lo"})
    assert len(rows) == 8 and raw.count('"schema": "llmdeck.allreduce/1"') == 8
    v = judge(rows, LinkProfile(name="loopback", rated_gbytes_s=0.05, max_latency_us=1e6))
    assert v.verdict == "pass" and v.busbw_gbps > 0.05  # a loaded 2-core machine still moves > 50 MB/s


def _marked(mark: str) -> list[int]:
    """The live processes whose environment carries ``LLMDECK_TEST_MARK=mark`` (ranks and spawner)."""
    import psutil

    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("LLMDECK_TEST_MARK") == mark and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return found


def _gone_within(mark: str, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while _marked(mark) and time.monotonic() < end:
        time.sleep(0.5)
    return not _marked(mark)


def test_a_timed_out_allreduce_leaves_no_rank_behind() -> None:
    """run_local's timeout ends the spawner's whole process group: its ranks had run on orphaned (200 of
    them, after a fuzzed --local 200, filled this machine's memory)."""
    from llmdeck.errors import OperationError

    mark = f"timeout-{time.monotonic_ns()}"
    with pytest.raises(OperationError, match="did not finish within 2 s"):
        run_local(2, backend="gloo", port=free_port(), timeout=2, env={"LLMDECK_TEST_MARK": mark})
    assert _gone_within(mark, 5), _marked(mark)


def test_ranks_end_when_their_spawner_is_killed() -> None:
    """The spawner killed outright (SIGKILL: no cleanup of its own): each rank sees its parent gone,
    also one still importing torch then, and exits within seconds."""
    import os
    import signal
    import subprocess
    import sys

    mark = f"kill-{time.monotonic_ns()}"
    argv = [
        sys.executable,
        "-m",
        "llmdeck.cluster.allreduce",
        "--local",
        "2",
        "--master-port",
        str(free_port()),
    ]
    proc = subprocess.Popen(
        argv,
        env={**os.environ, "LLMDECK_TEST_MARK": mark},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    end = time.monotonic() + 30
    while len(_marked(mark)) < 4 and time.monotonic() < end:  # the spawner, its resource tracker, 2 ranks
        time.sleep(0.2)
    assert len(_marked(mark)) >= 4
    time.sleep(3)  # the ranks past their rendezvous, all-reducing
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _gone_within(mark, 10), _marked(mark)


def test_cluster_ranks_run_from_the_source_without_llmdeck() -> None:
    # the per-node commands `cluster netcheck` runs (here both nodes are this machine: no ssh);
    # each rank is `python -c <allreduce.py>`, so a node needs torch, not llmdeck
    import sys

    from llmdeck.cluster.commands import Setup
    from llmdeck.cluster.netcheck import cluster_argvs, run_cluster
    from llmdeck.cluster.netenv import NetSpec

    hosts = ["127.0.0.1", "localhost"]
    argvs = cluster_argvs(
        hosts,
        ["127.0.0.1", "127.0.0.1"],
        net=NetSpec(interface="lo"),
        backend="gloo",
        port=free_port(),
        setup=Setup(python=sys.executable),
        sizes=[1024, 1 << 20],
    )
    assert all(a[0] == "env" and "-c" in a for a in argvs)
    rows, _ = run_cluster(argvs, timeout=120)
    assert [r.size_bytes for r in rows] == [1024, 1 << 20] and rows[0].world_size == 2
