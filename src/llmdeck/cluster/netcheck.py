"""Run the all-reduce acceptance test: here (N local ranks) or across the cluster's nodes over ssh."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from llmdeck.cluster import allreduce
from llmdeck.cluster.commands import Setup, over_ssh
from llmdeck.cluster.netenv import NetSpec, node_env
from llmdeck.cluster.verdict import Row, parse_rows
from llmdeck.errors import OperationError

MODULE = "llmdeck.cluster.allreduce"


def _source() -> str:
    """allreduce.py itself (stdlib + torch only): sent with ``python -c`` so that a node needs no llmdeck,
    only the Python (or the image) that has torch."""
    return Path(allreduce.__file__).read_text("utf-8")


def rank_argv(
    python: str, *, backend: str, rank: int, world: int, master: str, port: int, sizes: list[int] | None
) -> list[str]:
    argv = [python, "-c", _source(), "--backend", backend, "--rank", str(rank), "--world-size", str(world)]
    argv += ["--master-addr", master, "--master-port", str(port)]
    if sizes:
        argv += ["--sizes", ",".join(str(s) for s in sizes)]
    return argv


def cluster_argvs(
    hosts: list[str],
    ips: list[str],
    *,
    net: NetSpec,
    backend: str,
    port: int,
    setup: Setup | None = None,
    sizes: list[int] | None = None,
) -> list[list[str]]:
    """One command per node (rank = position; rank 0 on the head prints the rows). In docker mode
    the rank runs inside the node's container, which already has the node's environment."""
    setup = setup or Setup()
    out = []
    for rank, (host, ip) in enumerate(zip(hosts, ips, strict=True)):
        python = "python3" if setup.containerized else setup.python
        argv = rank_argv(
            python, backend=backend, rank=rank, world=len(hosts), master=ips[0], port=port, sizes=sizes
        )
        if setup.containerized:
            out.append(over_ssh(host, ["docker", "exec", setup.container, *argv]))
        else:
            out.append(over_ssh(host, argv, node_env(net, ip)))
    return out


def run_local(
    ranks: int, *, backend: str, port: int, timeout: float, env: dict[str, str] | None = None
) -> tuple[list[Row], str]:
    """``ranks`` processes on this machine; (rows, raw output). Bounded by ``timeout``."""
    argv = [
        sys.executable,
        "-m",
        MODULE,
        "--backend",
        backend,
        "--local",
        str(ranks),
        "--master-port",
        str(port),
    ]
    argv += ["--timeout", str(max(5.0, timeout / 2))]
    import os

    # its own process group: a timeout ends every rank it spawned, not only the spawner
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        raise OperationError(
            f"The all-reduce did not finish within {timeout:.0f} s.",
            hint="Raise --test-timeout on a busy machine.",
        ) from exc
    except BaseException:  # Ctrl-C: the ranks go with the command
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        tail = "\n".join((stderr or stdout).strip().splitlines()[-8:])
        raise OperationError(f"The all-reduce failed (exit {proc.returncode}):\n{tail}")
    return parse_rows(stdout), stdout


def _kill_group(proc: subprocess.Popen[str]) -> None:
    import os
    import signal

    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def run_cluster(argvs: list[list[str]], *, timeout: float) -> tuple[list[Row], str]:
    """Start every rank (workers first), then wait for rank 0's rows; everything bounded."""
    procs = [
        subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        for a in argvs[::-1]
    ]
    head = procs[-1]
    try:
        out, err = head.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        for p in procs:
            p.kill()
        raise OperationError(
            f"The all-reduce across the nodes did not finish within {timeout:.0f} s.",
            hint="A rank could not reach the head: check the interface, the firewall and --master-port.",
        ) from exc
    finally:
        for p in procs[:-1]:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    if head.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-8:])
        raise OperationError(f"Rank 0 of the all-reduce failed (exit {head.returncode}):\n{tail}")
    return parse_rows(out), out
