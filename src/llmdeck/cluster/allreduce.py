"""The interconnect acceptance test: an all-reduce sweep with torch.distributed.

Definitions follow nccl-tests (doc/PERFORMANCE.md): for a message of S bytes all-reduced in t
seconds over n ranks, ``algbw = S / t`` and ``busbw = algbw * 2 (n - 1) / n`` — the bus bandwidth
is what the link carries, comparable with its rated speed whatever n is. Latency is the time of the
smallest message. ``nccl`` runs on GPUs, ``gloo`` on CPUs (the same code path; CI runs gloo).

Run one process per rank (``python -m llmdeck.cluster.allreduce --rank R --world-size N
--master-addr A --master-port P``) or ``--local N`` to spawn N ranks on this machine. Rank 0 prints
one JSON line per message size (schema ``llmdeck.allreduce/1``) to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

SCHEMA = "llmdeck.allreduce/1"
DEFAULT_SIZES = [8, 1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 22, 1 << 24, 1 << 26]
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 5


def bus_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus factor: 2 (n - 1) / n."""
    return 2.0 * (world_size - 1) / world_size


def _measure(dist: Any, torch: Any, size: int, iters: int, warmup: int, device: str) -> float:
    """Seconds per all-reduce of ``size`` bytes (float32), averaged over ``iters`` after a warmup."""
    n = max(1, size // 4)
    buf = torch.ones(n, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(buf)
    _sync(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    _sync(torch, device)
    elapsed = (time.perf_counter() - start) / iters
    # the slowest rank decides, as in nccl-tests (max over ranks)
    t = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_rank(args: argparse.Namespace) -> None:
    """One rank of the sweep; rank 0 prints the JSON lines."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", args.master_addr)
    os.environ.setdefault("MASTER_PORT", str(args.master_port))
    device = "cpu"
    if args.backend == "nccl":
        local = args.rank % max(1, torch.cuda.device_count())
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    from datetime import timedelta

    dist.init_process_group(
        args.backend,
        rank=args.rank,
        world_size=args.world_size,
        timeout=timedelta(seconds=args.timeout),
    )
    try:
        for size in args.sizes:
            t = _measure(dist, torch, size, args.iters, args.warmup, device)
            if args.rank == 0:
                algbw = size / t
                row = {
                    "schema": SCHEMA,
                    "backend": args.backend,
                    "world_size": args.world_size,
                    "size_bytes": max(4, size // 4 * 4),
                    "iters": args.iters,
                    "time_us": t * 1e6,
                    "algbw_gbps": algbw / 1e9,
                    "busbw_gbps": algbw * bus_factor(args.world_size) / 1e9,
                }
                print(json.dumps(row), flush=True)
    finally:
        dist.destroy_process_group()


def exit_with_parent(parent: int | None = None) -> None:
    """End this process when ``parent`` (the one that started it) is gone, killed or timed out: a rank
    left behind keeps a CPU and its memory busy for nothing. A daemon thread polls once a second."""
    import threading

    expected = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def _spawned(rank: int, args: argparse.Namespace) -> None:
    exit_with_parent(args.spawner)  # the spawner may be gone while this rank still imported torch
    args.rank = rank
    run_rank(args)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m llmdeck.cluster.allreduce")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--local", type=int, default=0, help="spawn this many ranks here")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29533)
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=DEFAULT_SIZES)
    p.add_argument("--iters", type=int, default=DEFAULT_ITERS)
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for rendezvous and each op")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    exit_with_parent()
    if args.local:
        import torch.multiprocessing as mp

        args.world_size = args.local
        args.spawner = os.getpid()
        mp.spawn(_spawned, args=(args,), nprocs=args.local, join=True)  # type: ignore[attr-defined,no-untyped-call]
    else:
        run_rank(args)


if __name__ == "__main__":
    main()
