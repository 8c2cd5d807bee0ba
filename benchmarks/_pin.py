"""CPU pinning for the overhead benchmark on a small box: the engine on some cores, the load client and
the proxies (children of the benchmark process, which inherit its affinity) on the others.

``--engine-cpus 0 --client-cpus 1``: the engine is spawned while the benchmark's own affinity is
``{0}`` (its processes inherit it) and with ``VLLM_CPU_OMP_THREADS_BIND=0`` (vLLM's OpenMP threads
bound there, one per core); then the benchmark moves itself to ``{1}`` before it starts the proxies.
Other users' processes on a shared box are not pinned: they still run anywhere.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def parse_cpus(text: str | None) -> set[int] | None:
    """'0' or '0,2-3' -> {0} / {0, 2, 3}; None -> None (no pinning)."""
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def omp_bind(cpus: set[int]) -> str:
    """vLLM's VLLM_CPU_OMP_THREADS_BIND for one worker: a comma list."""
    return ",".join(str(c) for c in sorted(cpus))


@contextlib.contextmanager
def affinity(cpus: set[int] | None) -> Iterator[None]:
    """Run the block with this process's affinity set to ``cpus`` (what it spawns inherits it)."""
    if cpus is None:
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def tree_affinity(pid: int) -> dict[str, list[int]]:
    """The affinity of every thread of ``pid`` and its children (to record what the pinning did)."""
    import psutil

    seen: dict[str, list[int]] = {}
    procs = [psutil.Process(pid)]
    with contextlib.suppress(psutil.Error):
        procs += procs[0].children(recursive=True)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            for t in p.threads():
                cpus = sorted(os.sched_getaffinity(t.id))
                seen[f"{p.pid}/{t.id}"] = cpus
    return seen
