"""Preflight checks of the host: the port, memory, and the other tenants (Ollama, servers, GPU processes)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from llmdeck.runtime.host import MemInfo, NvmlReport
from llmdeck.runtime.preflight.findings import Finding
from llmdeck.runtime.tenants import InferenceProcess, OllamaStatus, ollama_unload_command
from llmdeck.util.net import bind_hint, bind_problem
from llmdeck.util.units import GIB
from llmdeck.util.units import fmt_gib as _gib

# ---- port -----------------------------------------------------------------------------------


def _listener(port: int) -> str | None:
    import psutil

    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    return f"pid {conn.pid} ({' '.join(psutil.Process(conn.pid).cmdline()[:4])})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.AccessDenied, OSError):
        return None
    return None


def check_port(host: str, port: int) -> list[Finding]:
    """The server's port must be free to bind (on the host it will bind)."""
    bind_host = "0.0.0.0" if host in {"0.0.0.0", ""} else host
    problem = bind_problem(port, bind_host)
    if problem is None:
        return []
    if problem != "in use":
        return [
            Finding(
                id="host-not-bindable",
                severity="error",
                message=f"The server cannot listen on {bind_host}:{port}: {problem}.",
                fix=bind_hint(bind_host, problem),
                data={"host": bind_host, "port": port, "problem": problem},
            )
        ]
    holder = _listener(port)
    by = f" by {holder}" if holder else ""
    return [
        Finding(
            id="port-in-use",
            severity="error",
            message=f"Port {port} is already in use{by}.",
            fix=f"Use another --port, or stop what holds it (`ss -lntp | grep :{port}`; `llmdeck status` "
            "lists llmdeck's own servers).",
            data={"port": port, "holder": holder},
        )
    ]


# ---- memory ---------------------------------------------------------------------------------


DROP_CACHES = "sync; echo 1 | sudo tee /proc/sys/vm/drop_caches"


def check_memory(need_bytes: int | None, mem: MemInfo) -> list[Finding]:
    """MemAvailable must cover the plan's need; page cache that could be dropped is pointed out.

    On unified-memory boxes (GB10) vLLM takes MemAvailable as the GPU's free memory (vllm PR #35356)
    and page cache left by a download can still block the start (vllm issue #48140).
    """
    if need_bytes is None or need_bytes <= 0:
        return []
    data = {
        "need_bytes": need_bytes,
        "available_bytes": mem.available,
        "free_bytes": mem.free,
        "page_cache_bytes": mem.page_cache,
    }
    if mem.available < need_bytes:
        short = need_bytes - mem.available
        fix = (
            f"Free {_gib(short)}: stop other tenants (see the findings below), or plan a smaller footprint "
            "(lower --max-model-len / --gpu-memory-utilization, a quantized model)."
        )
        if mem.page_cache > GIB:
            fix += f" {_gib(mem.page_cache)} is page cache; drop it with `{DROP_CACHES}`."
        return [
            Finding(
                id="memory-short",
                severity="error",
                message=f"The plan needs {_gib(need_bytes)} but only {_gib(mem.available)} is available "
                f"(MemAvailable, of {_gib(mem.total)}).",
                fix=fix,
                data=data,
            )
        ]
    if mem.free < need_bytes and mem.page_cache > GIB:
        return [
            Finding(
                id="page-cache",
                severity="warning",
                message=f"Only {_gib(mem.free)} is free right now; {_gib(mem.page_cache)} is page cache "
                f"(e.g. a model download). The plan needs {_gib(need_bytes)}: MemAvailable counts the cache "
                "as reclaimable, but on unified-memory GPUs the start can still fail (vllm issue #48140).",
                fix=f"Drop the page cache before starting: `{DROP_CACHES}`.",
                data=data,
            )
        ]
    return []


# ---- tenants --------------------------------------------------------------------------------


def check_ollama(status: OllamaStatus) -> list[Finding]:
    """Models Ollama keeps loaded hold memory vLLM will need."""
    if not status.reachable or not status.models:
        return []
    out: list[Finding] = []
    for m in status.models:
        where = f"{_gib(m.size_vram)} in GPU memory" if m.size_vram else "in system memory"
        out.append(
            Finding(
                id="ollama-model-loaded",
                severity="warning",
                message=f"Ollama ({status.url}) holds model {m.name!r}: {_gib(m.size)} loaded, {where}"
                + (f", until {m.expires_at}" if m.expires_at else "")
                + ".",
                fix=f"Unload it: {ollama_unload_command(m.name, status.url)}  "
                f"(or `ollama stop {shlex.quote(m.name)}`).",
                data=m.model_dump(),
            )
        )
    return out


def check_other_servers(procs: Iterable[InferenceProcess], *, own_port: int | None = None) -> list[Finding]:
    """Other vLLM / llama.cpp / SGLang servers share the GPU (and the port, if it is the same)."""
    out: list[Finding] = []
    for p in procs:
        name = {"vllm": "vLLM", "llama.cpp": "llama.cpp llama-server", "sglang": "SGLang"}[p.kind]
        mem = f", {_gib(p.rss_bytes)} RSS" if p.rss_bytes else ""
        model = f" serving {p.model}" if p.model else ""
        out.append(
            Finding(
                id=f"other-{p.kind.replace('.', '')}-server",
                severity="warning",
                message=f"Another {name} is running (pid {p.pid}, port {p.port}{model}{mem}); "
                "it holds memory the new server may need.",
                fix=f"Stop it if it is not needed: `llmdeck down NAME` for llmdeck's own servers, else "
                f"`kill {p.pid}` (then wait for its GPU memory to come back).",
                data=p.model_dump(),
            )
        )
    return out


def check_gpu(nvml: NvmlReport, *, exclude_pids: Iterable[int] = ()) -> list[Finding]:
    """Other processes on the GPU (NVML); say so when NVML cannot tell."""
    if not nvml.available:
        return [
            Finding(
                id="nvml-unavailable",
                severity="info",
                message=f"Cannot see GPU processes: {nvml.reason}.",
                fix="Install nvidia-ml-py (`pip install 'llmdeck[gpu]'`) on a GPU box to see other GPU "
                "tenants.",
            )
        ]
    out: list[Finding] = []
    if nvml.memory_not_supported:
        out.append(
            Finding(
                id="gpu-memory-not-supported",
                severity="info",
                message="The GPU does not report its memory through NVML (NotSupported: unified memory, e.g. "
                "GB10). vLLM counts MemAvailable as free GPU memory there.",
                fix="Rely on the memory check above; keep --gpu-memory-utilization at or below ~0.85 "
                "on GB10.",
            )
        )
    skip = set(exclude_pids)
    for p in nvml.processes:
        if p.pid in skip:
            continue
        used = f" using {_gib(p.used_bytes)}" if p.used_bytes else ""
        out.append(
            Finding(
                id="gpu-process",
                severity="warning",
                message=f"GPU {p.gpu_index} is in use by pid {p.pid}{used}"
                + (f" ({p.name})" if p.name else "")
                + ".",
                fix=f"Stop it if it is not needed (`kill {p.pid}`), or lower --gpu-memory-utilization "
                "to what is free.",
                data=p.model_dump(),
            )
        )
    return out
