"""``llmdeck cluster``: up, status, down across the nodes; the record that ties them together.

A cluster whose head and workers are all this machine (127.0.0.1 / localhost) is started for real
as local processes (local.py). Any other is the rendered commands (commands.py) run one after the
other, each bounded (ssh ``ConnectTimeout`` and a per-command timeout); the record of what was run
is ``STATE_DIR/cluster/remote.json``, and ``down`` runs each node's stop command from it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.cluster import local
from llmdeck.cluster.commands import NodeCommands, RayOptions, Setup, cluster_commands, is_local, ssh_host
from llmdeck.cluster.netenv import NetFinding, NetSpec, check_link
from llmdeck.cluster.raystatus import RayStatus, parse_ray_status
from llmdeck.errors import CheckFailedError, NotRunningError, OperationError, UsageError
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.localfile import read_regular_text


class ClusterRequest(BaseModel):
    head: str
    workers: list[str] = Field(default_factory=list)
    head_ip: str | None = None
    worker_ips: list[str] = Field(default_factory=list)
    net: NetSpec = Field(default_factory=NetSpec)
    ray: RayOptions = Field(default_factory=RayOptions)
    setup: Setup = Field(default_factory=Setup)
    timeout: float = Field(120.0, gt=0)

    @property
    def all_local(self) -> bool:
        return is_local(self.head) and all(is_local(w) for w in self.workers)


class ClusterUp(BaseModel):
    kind: Literal["local", "remote"]
    address: str
    nodes_expected: int
    status: RayStatus | None = None
    seconds: float
    commands: list[NodeCommands] = Field(default_factory=list)
    net: list[NetFinding] = Field(default_factory=list)
    dry_run: bool = False


class RemoteRecord(BaseModel):
    kind: str = "llmdeck.remote-ray/1"
    address: str
    commands: list[NodeCommands] = Field(min_length=1, description="the head first, then the workers")
    setup: Setup = Field(default_factory=Setup)


START_HINT = "Start one with `llmdeck cluster up --head H --worker W` first."


def remote_file(state_dir: Path) -> Path:
    return state_dir / "cluster" / "remote.json"


def render(req: ClusterRequest) -> list[NodeCommands]:
    if req.worker_ips and len(req.worker_ips) != len(req.workers):
        raise UsageError(
            f"{len(req.worker_ips)} --worker-ip for {len(req.workers)} --worker.",
            hint="Give one --worker-ip per --worker, in the same order, or none.",
        )
    if req.setup.containerized and not req.setup.image:
        raise UsageError(
            "--docker needs --image (the vLLM image every node runs).",
            hint="Add e.g. --image vllm/vllm-openai:v0.22.0, or use --venv.",
        )
    return cluster_commands(
        req.head,
        req.workers,
        net=req.net,
        opts=req.ray,
        setup=req.setup,
        head_ip=req.head_ip,
        worker_ips=req.worker_ips or None,
    )


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        # a node's output is data: bytes that are not UTF-8 (a log, a broken peer) are shown replaced
        return subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise OperationError(f"{argv[0]} is not installed here.") from exc
    except subprocess.TimeoutExpired as exc:
        raise OperationError(f"`{' '.join(argv[:4])} ...` did not finish within {timeout:.0f} s.") from exc


def _host(destination: str) -> str:
    """The machine an ssh destination names (``user@host`` -> ``host``) in one spelling: lower-cased,
    without a name's final dot, an address in its short form (`H1.` is h1, `fd00:0::1` is fd00::1)."""
    import ipaddress

    host = ssh_host(destination).lower().rstrip(".")
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


def check_nodes(req: ClusterRequest) -> None:
    """Refuse a node list that cannot make a cluster: a worker named twice or named as the head, or
    loopback names mixed with other machines (a remote node would reach itself at 127.0.0.1)."""
    if req.all_local:
        return  # both Ray nodes on this machine: the loopback names are the point
    head = ("--head-ip" if req.head_ip else "--head", _host(req.head_ip or req.head))
    flag = "--worker-ip" if req.worker_ips else "--worker"
    nodes = [head, *((flag, _host(w)) for w in (req.worker_ips or req.workers))]
    for i, (name, host) in enumerate(nodes):
        if is_local(host):
            raise UsageError(
                f"{name} {host} names each machine to itself, so the other nodes cannot reach it there.",
                hint="Give every node its address (or name) on the link between the boxes, or make all "
                "of them 127.0.0.1 for two Ray nodes on this machine.",
            )
        if any(host == other for _, other in nodes[:i]):
            what = "the head's machine" if host == nodes[0][1] else "given twice"
            raise UsageError(
                f"{name} {host} is {what}: one machine cannot be two Ray nodes of a cluster across boxes.",
                hint="Name each other machine once with --worker; the head is not a worker.",
            )


def up(
    req: ClusterRequest, state_dir: Path, *, dry_run: bool = False, events: local.ClusterEvents | None = None
) -> ClusterUp:
    """The cluster ``req`` names: started here (all nodes local), over ssh, or only rendered (dry run);
    ``events`` hears what a local start did on the way (a picked port taken, started again)."""
    check_nodes(req)
    net = check_link(req.net) if req.net.interface or req.net.hcas else []
    failed = [f for f in net if f.severity == "fail"]
    if failed and is_local(req.head) and not dry_run:  # this machine is the head: its link is wrong
        raise CheckFailedError(
            "The link check failed on this node: " + "; ".join(f.message for f in failed),
            hint=" ".join(f.fix for f in failed if f.fix) + " Nothing was started.",
        )
    expected = 1 + len(req.workers)
    t0 = time.monotonic()
    if req.all_local and not dry_run:
        return _up_local(req, state_dir, net, events)
    commands = render(req)
    address = f"{req.head_ip or ssh_host(req.head)}:{req.ray.port}"
    if dry_run:
        return ClusterUp(
            kind="remote",
            address=address,
            nodes_expected=expected,
            seconds=0.0,
            commands=commands,
            net=net,
            dry_run=True,
        )
    atomic_write_json(
        remote_file(state_dir),
        RemoteRecord(address=address, commands=commands, setup=req.setup).model_dump(mode="json"),
    )
    for node in commands:
        for argv in node.up:
            done = _run(argv, req.timeout)
            if done.returncode != 0:
                raise OperationError(
                    f"Starting the {node.role} on {node.host} failed (exit {done.returncode}): "
                    f"{(done.stderr or done.stdout).strip()[-400:]}",
                    hint="`llmdeck cluster down` stops what did start.",
                )
    status = remote_status(state_dir, timeout=req.timeout)
    return ClusterUp(
        kind="remote",
        address=address,
        nodes_expected=expected,
        status=status,
        seconds=time.monotonic() - t0,
        commands=commands,
        net=net,
    )


def _up_local(
    req: ClusterRequest, state_dir: Path, net: list[NetFinding], events: local.ClusterEvents | None
) -> ClusterUp:
    """Real Ray processes here: 1 CPU and no GPU a node unless asked, waited for until all are alive."""
    t0 = time.monotonic()
    expected = 1 + len(req.workers)
    gpus = req.ray.num_gpus if req.ray.num_gpus is not None else 0
    opts = req.ray.model_copy(update={"num_cpus": req.ray.num_cpus or 1, "num_gpus": gpus})
    cluster = local.start(
        state_dir, port=req.ray.port, workers=len(req.workers), opts=opts, timeout=req.timeout, events=events
    )
    try:
        status = local.wait_nodes(cluster, expected, timeout=req.timeout)
    except BaseException:
        local.stop(state_dir, grace=5.0)
        raise
    return ClusterUp(
        kind="local",
        address=cluster.address,
        nodes_expected=expected,
        status=status,
        seconds=time.monotonic() - t0,
        net=net,
    )


def remote_status(state_dir: Path, *, timeout: float = 30.0) -> RayStatus:
    rec = load_remote(state_dir)
    if rec is None:
        raise NotRunningError("No cluster recorded.", hint=START_HINT)
    head = rec.commands[0]
    if head.status is None:
        raise OperationError("The recorded cluster has no status command.")
    done = _run(head.status, timeout)
    return parse_ray_status(done.stdout + done.stderr)


def load_remote(state_dir: Path) -> RemoteRecord | None:
    path = remote_file(state_dir)
    if not path.is_file():
        return None
    try:  # bounded, never a blocking open (a pipe put there after the check)
        return RemoteRecord.model_validate_json(read_regular_text(path, local.RECORD_BYTES))
    except (OSError, ValueError) as exc:  # was: None, as if no cluster ran (its nodes kept running)
        raise NotRunningError(
            f"The record of the Ray cluster, {path}, is unreadable ({local.record_problem(exc)}); its nodes "
            "may still run Ray.",
            hint=f"Stop Ray on each node (`ray stop` there), then delete {path}.",
        ) from exc


def status(state_dir: Path, *, timeout: float = 30.0) -> tuple[str, str, RayStatus]:
    """(kind, address, parsed ``ray status``) of the recorded cluster."""
    rec = local.load(state_dir)
    if rec is not None:
        return "local", rec.address, local.status(rec, timeout=timeout)
    remote = load_remote(state_dir)
    if remote is not None:
        return "remote", remote.address, remote_status(state_dir, timeout=timeout)
    raise NotRunningError("No cluster started by llmdeck.", hint=START_HINT)


def down(state_dir: Path, *, grace: float = 15.0, timeout: float = 60.0) -> tuple[str, float]:
    """Stop the recorded cluster (workers first). (kind, seconds); kind "none" when none is recorded:
    nothing to stop is not an error (as `llmdeck down --all` with no server), so scripts can run it
    to make sure no cluster is left."""
    t0 = time.monotonic()
    if local.load(state_dir) is not None:
        local.stop(state_dir, grace=grace)
        return "local", time.monotonic() - t0
    rec = load_remote(state_dir)
    if rec is None:
        return "none", time.monotonic() - t0
    errors = []
    for node in reversed(rec.commands):
        for argv in node.down:
            done = _run(argv, timeout)
            if done.returncode != 0:
                errors.append(f"{node.host}: {(done.stderr or done.stdout).strip()[-200:]}")
    if errors:
        raise OperationError(
            "Some nodes did not stop: " + "; ".join(errors), hint="Run `llmdeck cluster down` again."
        )
    remote_file(state_dir).unlink(missing_ok=True)
    return "remote", time.monotonic() - t0


def logs(state_dir: Path, *, lines: int = 50, timeout: float = 30.0) -> list[tuple[str, str]]:
    """(node, log tail) for every node of the recorded cluster: the local ``ray start`` logs, or each
    node's Ray log fetched with its rendered command."""
    rec = local.load(state_dir)
    if rec is not None:
        out = []
        for node in rec.nodes:
            try:
                text = Path(node.log).read_text("utf-8", errors="replace")
            except OSError as exc:
                text = f"(cannot read {node.log}: {exc.strerror})"
            out.append((f"{node.role} (pgid {node.pgid})", "\n".join(text.splitlines()[-lines:])))
        return out
    remote = load_remote(state_dir)
    if remote is None:
        raise NotRunningError("No cluster started by llmdeck.", hint=START_HINT)
    result = []
    for n in remote.commands:
        if not n.logs:
            continue
        done = _run(
            [str(lines) if a == "LINES" else a.replace(" LINES ", f" {lines} ") for a in n.logs], timeout
        )
        result.append((f"{n.role} {n.host}", (done.stdout + done.stderr).rstrip()))
    return result
