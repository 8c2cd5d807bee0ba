"""A Ray cluster on this machine: a head and worker processes, started, asked and stopped by llmdeck.

Each node is ``ray start --block`` in its own session (process group), so llmdeck stops exactly the
processes it started — never ``ray stop``, which stops every Ray process of the machine, other
people's included. Stopping sends SIGTERM to the group (Ray drains, then exits), waits ``grace``
seconds, then SIGKILL. The record (ports, process groups, logs) is kept in
``STATE_DIR/cluster/local.json`` for ``cluster status`` and ``cluster down``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psutil
from pydantic import BaseModel, Field

from llmdeck.cluster.commands import RayOptions, ray_start_argv
from llmdeck.cluster.raystatus import RayStatus, parse_ray_status
from llmdeck.errors import LlmdeckError, MissingDependencyError, NotRunningError, OperationError
from llmdeck.runtime.portpick import retry_on_clash
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.localfile import read_regular_text
from llmdeck.util.net import free_port
from llmdeck.util.procgroup import signal_group

READY_MARK = "block forever"


class ClusterEvent(BaseModel):
    """One step of ``cluster up`` worth telling, for the caller to render (the CLI: on stderr)."""

    kind: str = Field(description="port_clash: a picked port was taken, the head started again.")
    message: str
    data: dict[str, int] = Field(default_factory=dict)


ClusterEvents = Callable[[ClusterEvent], None]


class LocalNode(BaseModel):
    role: str
    pgid: int
    log: str
    argv: list[str]


class LocalCluster(BaseModel):
    kind: str = "llmdeck.local-ray/1"
    address: str
    port: int
    temp_dir: str
    nodes: list[LocalNode] = Field(default_factory=list)
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    start_seconds: float = 0.0


def ray_command() -> list[str]:
    """Ray's CLI in this Python (``python -m ray.scripts.scripts``); a clear error when missing."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "Ray is not installed in this Python.",
            hint="pip install 'llmdeck[cluster]' (pins ray[default]).",
        ) from exc
    return [sys.executable, "-m", "ray.scripts.scripts"]


def state_file(state_dir: Path) -> Path:
    return state_dir / "cluster" / "local.json"


RECORD_BYTES = 1 << 20  # a cluster record is a few hundred bytes


def record_problem(exc: Exception) -> str:
    """Why a cluster record cannot be read, in words (it had said "ValidationError")."""
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, OSError):
        return exc.strerror or "it cannot be read"
    return "not JSON, or not a cluster record"


def load(state_dir: Path) -> LocalCluster | None:
    path = state_file(state_dir)
    if not path.is_file():
        return None
    try:  # bounded, never a blocking open (a pipe put there after the check)
        return LocalCluster.model_validate_json(read_regular_text(path, RECORD_BYTES))
    except (OSError, ValueError) as exc:  # was: None, as if no cluster ran (its Ray kept running)
        raise NotRunningError(
            f"The record of the local Ray cluster, {path}, is unreadable ({record_problem(exc)}); the Ray "
            "processes it listed may still run.",
            hint="Stop them (`ps -eo pgid,args | grep 'ray start'`, then kill -- -PGID), then delete "
            f"{path}.",
        ) from exc


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> int:
    from llmdeck.util.localfile import ensure_dir

    ensure_dir(log.parent)  # under the state dir: 0700, the state root too when missing
    from llmdeck.engines.process import spawn_detached

    with log.open("wb") as fh:
        return spawn_detached(argv, fh, env).pid  # a new session: pid == pgid


def _wait_ready(log: Path, pgid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text("utf-8", errors="replace") if log.exists() else ""
        if READY_MARK in text:
            return
        if not group_alive(pgid):
            tail = "\n".join(text.splitlines()[-15:])
            raise OperationError(f"`ray start` exited before it was ready (log {log}):\n{tail}")
        time.sleep(0.3)
    raise OperationError(
        f"`ray start` was not ready after {timeout:.0f} s (log {log}).",
        hint="The machine may be busy; raise --step-timeout, or read the log.",
    )


def start(
    state_dir: Path,
    *,
    port: int,
    workers: int = 1,
    opts: RayOptions | None = None,
    timeout: float = 120.0,
    events: ClusterEvents | None = None,
) -> LocalCluster:
    """Head + ``workers`` worker processes on 127.0.0.1; each waited for (bounded by ``timeout``).

    Ray's client-server port, when the caller gave none, is one llmdeck picked (``free_port``): another
    program can take it before Ray binds it. Ray's client server then dies just after ``ray start``
    said it was ready, and the head with it; that clash starts the head again on another picked port,
    ``PORT_TRIES`` starts in all (runtime/portpick's ``retry_on_clash``, as for tune and quickstart),
    each told to ``events``."""
    existing = load(state_dir)
    if existing and any(group_alive(n.pgid) for n in existing.nodes):
        raise OperationError(
            f"A local Ray cluster started by llmdeck is already up at {existing.address}.",
            hint="`llmdeck cluster down` first.",
        )
    base = opts or RayOptions(num_cpus=1, num_gpus=0, object_store_bytes=100 * 1000 * 1000)
    if base.client_server_port is not None:  # the caller's port: a clash is theirs to solve
        return _start_nodes(state_dir, port, workers, base, base.client_server_port, timeout)
    # a free client-server port: Ray's fixed default (10001) clashes with any other Ray on the machine
    cluster, _ = retry_on_clash(
        free_port(),
        lambda client: _start_nodes(state_dir, port, workers, base, client, timeout),
        lambda _: free_port(),
        _client_port_clash,
        lambda taken, client, _: (events or _ignore)(_clash_event(taken, client)),
    )
    return cluster


def _ignore(_: ClusterEvent) -> None:
    return None


def _clash_event(taken: int, client: int) -> ClusterEvent:
    return ClusterEvent(
        kind="port_clash",
        message=f"Ray's client-server port {taken} was taken by another program before Ray bound it; "
        f"starting the head again on port {client}",
        data={"port": taken, "next_port": client},
    )


def _client_port_clash(exc: LlmdeckError, client: int) -> bool:
    """The head died because its client-server port was taken (Ray's log, quoted in ``exc``)."""
    text = exc.message
    return (
        isinstance(exc, OperationError)
        and f":{client}" in text
        and ("Address already in use" in text or "Failed to bind" in text)
    )


def _start_nodes(
    state_dir: Path, port: int, workers: int, base: RayOptions, client: int, timeout: float
) -> LocalCluster:
    """One try of :func:`start` with ``client`` as Ray's client-server port; all stopped on a failure."""
    ray = ray_command()
    temp = Path(f"/tmp/llmdeck-ray-{port}")  # short: Ray's unix socket paths must stay < 108 bytes
    base = base.model_copy(
        update={"port": port, "temp_dir": str(temp), "block": True, "client_server_port": client}
    )
    # nothing to drain on SIGTERM (no Serve replicas): Ray 2.60 waits 30 s otherwise
    # (ray/_private/node.py _drain_node_before_shutdown, RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    address = f"127.0.0.1:{port}"
    cluster = LocalCluster(address=address, port=port, temp_dir=str(temp))
    logs = state_dir / "cluster" / "logs"
    t0 = time.monotonic()
    try:
        for i in range(workers + 1):
            role = "head" if i == 0 else f"worker{i}"
            argv = [
                *ray,
                *ray_start_argv(base, node_ip="127.0.0.1", head_address=None if i == 0 else address)[1:],
            ]
            log = logs / f"ray-{role}.log"
            pgid = _spawn(argv, log, _node_env(env, i, base.num_gpus))
            cluster.nodes.append(LocalNode(role=role, pgid=pgid, log=str(log), argv=argv))
            atomic_write_json(state_file(state_dir), cluster.model_dump(mode="json"))
            _wait_ready(log, pgid, timeout)
            if i == 0:
                _wait_listening(log, pgid, client, timeout)
    except BaseException:
        stop(state_dir, grace=5.0)
        raise
    cluster.start_seconds = time.monotonic() - t0
    atomic_write_json(state_file(state_dir), cluster.model_dump(mode="json"))
    return cluster


def _wait_listening(log: Path, pgid: int, port: int, timeout: float) -> None:
    """The head's group listens on its client-server port: Ray says it is ready before its client
    server has bound the port, and a taken port then ended the head a second later, the cluster
    recorded as up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _group_listens(pgid, port):
            return
        if not group_alive(pgid):
            tail = "\n".join(log.read_text("utf-8", errors="replace").splitlines()[-15:])
            raise OperationError(f"`ray start` exited after it said it was ready (log {log}):\n{tail}")
        time.sleep(0.3)
    raise OperationError(
        f"Ray's client server did not listen on port {port} within {timeout:.0f} s (log {log}).",
        hint="The machine may be busy; raise --step-timeout, or read the log.",
    )


def _group_listens(pgid: int, port: int) -> bool:
    for proc in group_members(pgid):
        try:
            conns = proc.net_connections("tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
            return True
    return False


def _node_env(env: dict[str, str], index: int, gpus: int | None) -> dict[str, str]:
    """Node ``index`` of this machine sees its own GPUs (``gpus`` each), as a separate box would: Ray
    takes a raylet's GPUs from CUDA_VISIBLE_DEVICES at start."""
    if not gpus:
        return env
    return {**env, "CUDA_VISIBLE_DEVICES": ",".join(str(index * gpus + g) for g in range(gpus))}


def group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return out


def group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def stop(state_dir: Path, *, grace: float = 15.0) -> float | None:
    """Stop what ``start`` recorded: workers, then the head. Seconds it took; None when none was up."""
    cluster = load(state_dir)
    if cluster is None:
        return None
    t0 = time.monotonic()
    groups = [n.pgid for n in reversed(cluster.nodes)]
    for pgid in groups:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(group_alive(g) for g in groups):
        time.sleep(0.2)
    for pgid in groups:
        if group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
    end = time.monotonic() + 5
    while time.monotonic() < end and any(group_alive(g) for g in groups):
        time.sleep(0.1)
    state_file(state_dir).unlink(missing_ok=True)
    # Ray's session files (sockets, its own logs) in the temp dir llmdeck named; `ray start`'s output
    # stays in STATE_DIR/cluster/logs
    temp = Path(cluster.temp_dir)
    if temp.name.startswith("llmdeck-ray-") and not any(group_alive(g) for g in groups):
        shutil.rmtree(temp, ignore_errors=True)
    return time.monotonic() - t0


def status(cluster: LocalCluster, *, timeout: float = 30.0) -> RayStatus:
    """``ray status`` of the recorded cluster, parsed; bounded by ``timeout``."""
    argv = [*ray_command(), "status", "--address", cluster.address]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise OperationError(f"`ray status` did not answer within {timeout:.0f} s.") from exc
    return parse_ray_status(done.stdout + done.stderr)


def wait_nodes(cluster: LocalCluster, count: int, *, timeout: float = 60.0) -> RayStatus:
    """``ray status`` until ``count`` nodes are alive (a worker registers a few seconds after it starts)."""
    deadline = time.monotonic() + timeout
    last: RayStatus | None = None
    while time.monotonic() < deadline:
        try:
            last = status(cluster, timeout=max(1.0, deadline - time.monotonic()))
        except OperationError:
            last = None
        if last is not None and last.nodes_alive >= count:
            return last
        time.sleep(1.0)
    seen = last.nodes_alive if last else 0
    raise OperationError(f"{seen} of {count} Ray nodes alive after {timeout:.0f} s at {cluster.address}.")
