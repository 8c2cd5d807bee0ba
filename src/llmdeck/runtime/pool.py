"""The unified memory pool as the kernel sees it: OS, page cache, each server, Ollama, free.

On GB10 NVML reports no memory (``nvmlDeviceGetMemoryInfo`` raises NotSupported), so ``llmdeck
status`` and ``llmdeck doctor`` read /proc/meminfo instead, and split ``MemTotal`` into: free
(``MemFree``), page cache (``Cached + Buffers``, mostly reclaimable), each llmdeck server and each
other inference server (the PSS of its process tree; a gateway's managed models are named as such),
Ollama's loaded models (``/api/ps``), and the rest: the OS, the desktop and every other process.
The CPU engine's memory is host memory, so a CPU box is read the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.runtime.host import MemInfo
from llmdeck.util.units import GIB

PartKind = Literal["os", "page_cache", "server", "managed", "other_server", "ollama", "free"]
POOL_SCHEMA_VERSION = 1


class PoolPart(BaseModel):
    kind: PartKind
    name: str
    bytes: int
    detail: str = ""


class PoolReport(BaseModel):
    """The pool split into its holders (bytes), from /proc/meminfo and the process table."""

    schema_version: int = POOL_SCHEMA_VERSION
    source: str = "/proc/meminfo"
    total: int
    available: int
    parts: list[PoolPart] = Field(default_factory=list)

    def summary(self) -> str:
        parts = ", ".join(f"{p.name} {p.bytes / GIB:.2f}" for p in self.parts)
        return f"memory pool ({self.source}) {self.total / GIB:.2f} GiB: {parts} GiB"

    def lines(self) -> list[str]:
        total, available = self.total / GIB, self.available / GIB
        out = [f"memory pool ({self.source}): {total:.2f} GiB, MemAvailable {available:.2f} GiB"]
        for p in self.parts:
            extra = f" ({p.detail})" if p.detail else ""
            out.append(f"  {p.kind:<12} {p.bytes / GIB:7.2f} GiB  {p.name}{extra}")
        return out


def split_pool(
    mem: MemInfo,
    servers: Iterable[tuple[str, int, str]],
    ollama: Iterable[tuple[str, int]],
    managed: Iterable[str] = (),
) -> PoolReport:
    """The pool from a meminfo and the holders found (``servers``: name, bytes, kind of server)."""
    managed_names = set(managed)
    parts = [PoolPart(kind="free", name="free (MemFree)", bytes=mem.free)]
    parts.append(
        PoolPart(kind="page_cache", name="page cache", bytes=mem.page_cache, detail="mostly reclaimable")
    )
    held = 0
    for name, size, what in servers:
        kind: PartKind = (
            "managed" if name in managed_names else ("server" if what == "llmdeck" else "other_server")
        )
        parts.append(PoolPart(kind=kind, name=name, bytes=size, detail=what))
        held += size
    for name, size in ollama:
        parts.append(PoolPart(kind="ollama", name=name, bytes=size, detail="Ollama /api/ps"))
        held += size
    rest = max(0, mem.total - mem.free - mem.page_cache - held)
    parts.insert(0, PoolPart(kind="os", name="OS, desktop and other processes", bytes=rest))
    return PoolReport(total=mem.total, available=mem.available, parts=parts)


def read_pool(servers_dir: Path, managed: Iterable[str] = ()) -> PoolReport:
    """The pool now: llmdeck's servers from its records, other inference servers, Ollama."""
    from llmdeck.engines import get as get_engine
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.guard import tree_bytes
    from llmdeck.runtime.host import read_meminfo
    from llmdeck.runtime.state import StateStore
    from llmdeck.runtime.tenants import find_inference_processes, ollama_ps

    servers: list[tuple[str, int, str]] = []
    ours: list[int] = []
    for record in StateStore(servers_dir).list():
        if record.pid and not get_engine(record.spec.engine).containerized and is_alive(record):
            servers.append((record.name, tree_bytes(record.pid), "llmdeck"))
            ours.append(record.pid)
    for proc in find_inference_processes(exclude_pids=ours):
        if not _under(proc.pid, ours):
            servers.append(
                (f"{proc.kind} pid {proc.pid} ({proc.model or '?'})", tree_bytes(proc.pid), proc.kind)
            )
    status = ollama_ps()
    return split_pool(read_meminfo(), servers, [(m.name, m.size) for m in status.models], managed)


def _under(pid: int, roots: list[int]) -> bool:
    """``pid`` is one of ``roots`` or a descendant of one (vLLM's engine core under its API server)."""
    import psutil

    try:
        chain = {p.pid for p in psutil.Process(pid).parents()} | {pid}
    except psutil.Error:
        return False
    return bool(chain & set(roots))


def pool_is_unified() -> bool:
    """No GPU whose memory NVML reads: GB10 (NotSupported) or a CPU box (the CPU engine)."""
    from llmdeck.runtime.host import nvml_snapshot

    report = nvml_snapshot()
    return not report.available or report.memory_not_supported or not report.gpus
