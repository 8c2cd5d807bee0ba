"""Doctor probes of the host itself: OS, memory, disk, ports, other tenants."""

from __future__ import annotations

import platform
from pathlib import Path

from llmdeck.doctor.model import DoctorFinding
from llmdeck.runtime.host import MemInfo, disk_free, existing_ancestor
from llmdeck.runtime.preflight import DROP_CACHES, check_port
from llmdeck.runtime.tenants import InferenceProcess, OllamaStatus, ollama_unload_command
from llmdeck.util.units import GIB
from llmdeck.util.units import fmt_gib as _gib

DISK_FAIL_BYTES = 10 * GIB  # not even a small quantized model fits
DISK_WARN_BYTES = 100 * GIB  # the seeds' models are 20-70 GB each (seed 000: 35 GB in 14 shards)
PAGE_CACHE_WARN_BYTES = 8 * GIB
SWAP_USED_WARN_BYTES = 1 * GIB
PSI_WARN_AVG10 = 10.0


def probe_os(machine: str | None = None, system: str | None = None) -> list[DoctorFinding]:
    machine = machine or platform.machine()
    system = system or platform.system()
    data = {"machine": machine, "system": system, "platform": platform.platform()}
    if system != "Linux":
        return [
            DoctorFinding(
                id="os-not-linux",
                area="os",
                status="fail",
                message=f"This is {system}: vLLM serves on Linux only.",
                fix="Run llmdeck on the Linux GPU box (DGX OS / Ubuntu), or in WSL2 with the NVIDIA driver.",
                data=data,
            )
        ]
    arm = " (aarch64: DGX Spark / GX10 class; use arm64 images and wheels)" if machine == "aarch64" else ""
    return [DoctorFinding(id="os", area="os", status="ok", message=f"Linux {machine}{arm}.", data=data)]


def probe_memory(mem: MemInfo, psi_avg10: float | None = None) -> list[DoctorFinding]:
    """MemAvailable, page cache and swap: what vLLM's start will see (unified memory: all of it)."""
    used_swap = mem.swap_used
    data = {
        "total_bytes": mem.total,
        "available_bytes": mem.available,
        "free_bytes": mem.free,
        "page_cache_bytes": mem.page_cache,
        "swap_total_bytes": mem.swap_total,
        "swap_used_bytes": used_swap,
        "psi_some_avg10": psi_avg10,
    }
    out = [
        DoctorFinding(
            id="memory",
            area="memory",
            status="ok",
            message=f"{_gib(mem.available)} available (MemAvailable) of {_gib(mem.total)}; "
            f"{_gib(mem.page_cache)} page cache; swap {_gib(used_swap)} used of {_gib(mem.swap_total)}.",
            data=data,
        )
    ]
    if mem.page_cache > PAGE_CACHE_WARN_BYTES and mem.free < mem.page_cache:
        out.append(
            DoctorFinding(
                id="memory-page-cache",
                area="memory",
                status="warn",
                message=f"{_gib(mem.page_cache)} of memory is page cache (e.g. a model download). On "
                "unified-memory GPUs it can still block vLLM's start although MemAvailable counts it "
                "(vllm issue #48140).",
                fix=f"Drop it before starting a server: `{DROP_CACHES}`.",
                data=data,
            )
        )
    if used_swap > SWAP_USED_WARN_BYTES:
        out.append(
            DoctorFinding(
                id="memory-swapping",
                area="memory",
                status="warn",
                message=f"{_gib(used_swap)} of swap is in use: the box has been short of memory; a model "
                "start now can push it into heavy swapping (seed 004: GLM-4.7-Flash froze the machine).",
                fix="Stop what holds the memory (see tenants below), then "
                "`sudo swapoff -a && sudo swapon -a`.",
                data=data,
            )
        )
    if psi_avg10 is not None and psi_avg10 > PSI_WARN_AVG10:
        out.append(
            DoctorFinding(
                id="memory-pressure",
                area="memory",
                status="warn",
                message=f"Memory pressure (PSI some avg10) is {psi_avg10:.1f}%: tasks stall on memory.",
                fix="Free memory before starting a model: stop other tenants or large processes.",
                data=data,
            )
        )
    return out


def probe_disk(paths: dict[str, Path], *, free_bytes: int | None = None) -> list[DoctorFinding]:
    """Free space where models go, one finding per filesystem (``paths``: label -> folder)."""
    by_fs: dict[int, list[tuple[str, Path, Path]]] = {}
    for label, path in paths.items():
        where = existing_ancestor(path.expanduser())
        by_fs.setdefault(where.stat().st_dev, []).append((label, path, where))
    out = []
    for entries in by_fs.values():
        where = entries[0][2]
        free = disk_free(where) if free_bytes is None else free_bytes
        labels = " and ".join(label for label, _, _ in entries)
        where_desc = ", ".join(f"{path} ({label})" for label, path, _ in entries)
        if free < DISK_FAIL_BYTES:
            status, fix = "fail", f"Free disk space under {where}, or point {labels} at a bigger disk."
        elif free < DISK_WARN_BYTES:
            status, fix = "warn", f"One large model (20-70 GB) may not fit: free space or move {labels}."
        else:
            status, fix = "ok", ""
        out.append(
            DoctorFinding(
                id="disk",
                area="disk",
                status=status,
                message=f"{_gib(free)} free for {where_desc}.",
                fix=fix,
                data={"paths": {label: str(path) for label, path, _ in entries}, "free_bytes": free},
            )
        )
    return out


def probe_ollama(status: OllamaStatus) -> list[DoctorFinding]:
    if not status.reachable:
        return [DoctorFinding(id="ollama", area="tenants", status="ok", message="No Ollama answering.")]
    if not status.models:
        return [
            DoctorFinding(
                id="ollama",
                area="tenants",
                status="ok",
                message="Ollama is running with no model loaded.",
                data={"url": status.url},
            )
        ]
    names = ", ".join(f"{m.name} ({_gib(m.size)})" for m in status.models)
    unload = "; ".join(ollama_unload_command(m.name, status.url) for m in status.models)
    return [
        DoctorFinding(
            id="ollama-models-loaded",
            area="tenants",
            status="warn",
            message=f"Ollama keeps models loaded: {names}. They hold memory vLLM will need "
            "(seed 000: KEEP_ALIVE held 20 GB and vLLM failed to start).",
            fix=f"Unload them: {unload} (or set OLLAMA_KEEP_ALIVE=0).",
            data={"models": [m.model_dump() for m in status.models]},
        )
    ]


def probe_servers(procs: list[InferenceProcess]) -> list[DoctorFinding]:
    if not procs:
        return [
            DoctorFinding(id="servers", area="tenants", status="ok", message="No other inference servers.")
        ]
    desc = ", ".join(f"{p.kind} pid {p.pid}" + (f" port {p.port}" if p.port else "") for p in procs)
    return [
        DoctorFinding(
            id="servers-running",
            area="tenants",
            status="warn",
            message=f"Other inference servers are running: {desc}. They share the GPU memory.",
            fix="Stop the ones you don't need (`llmdeck down NAME` for llmdeck's; "
            "`llmdeck status` lists them).",
            data={"processes": [p.model_dump() for p in procs]},
        )
    ]


def probe_port(host: str, port: int) -> list[DoctorFinding]:
    found = check_port(host, port)
    if not found:
        return [
            DoctorFinding(
                id="port",
                area="ports",
                status="ok",
                message=f"Port {port} on {host} is free for a server.",
                data={"host": host, "port": port},
            )
        ]
    f = found[0]
    return [
        DoctorFinding(
            id="port-in-use", area="ports", status="warn", message=f.message, fix=f.fix, data=f.data
        )
    ]


def probe_pool(servers_dir: Path) -> list[DoctorFinding]:
    """Unified memory (GB10: NVML reports none; a CPU box): the pool read from the kernel, by holder."""
    from llmdeck.runtime.pool import pool_is_unified, read_pool

    if not pool_is_unified():
        return []
    pool = read_pool(servers_dir)
    return [
        DoctorFinding(
            id="memory-pool",
            area="memory",
            status="ok",
            message=pool.summary() + ".",
            data=pool.model_dump(mode="json"),
        )
    ]
