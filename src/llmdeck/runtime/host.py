"""This host's facts, probed in one place: memory (page cache, swap, PSI), GPUs via NVML, disk, HF cache.

Preflight, the start-up watchdog, the restart sequence, ``llmdeck doctor`` and the bench monitor all
read the host through this module. NVML is optional (nvidia-ml-py); its one init/shutdown is
:func:`nvml_session` (in :mod:`llmdeck.util.nvml`, so plan/ uses it too). On unified memory (GB10)
the memory query raises NotSupported and the GPU's memory is "not reported", never 0. Heavy imports
(psutil, pynvml) happen inside the functions.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.util.hfpaths import default_hf_home, hf_home
from llmdeck.util.nvml import NvmlUnavailable, nvml_init, nvml_session, nvml_shutdown
from llmdeck.util.nvml import text as _text
from llmdeck.util.units import GIB, MIB

__all__ = [
    "GIB",
    "NVML_NOT_REPORTED",
    "GpuInfo",
    "GpuProcess",
    "MemInfo",
    "NvmlReport",
    "NvmlSampler",
    "NvmlUnavailable",
    "default_hf_home",
    "disk_free",
    "existing_ancestor",
    "hf_cache_dir",
    "nvml_init",
    "nvml_session",
    "nvml_shutdown",
    "nvml_snapshot",
    "nvml_versions",
    "parse_meminfo",
    "read_meminfo",
    "read_psi_avg10",
]

PSI_MEMORY = Path("/proc/pressure/memory")
NVML_NOT_REPORTED = "not reported by NVML"


# ---- memory ---------------------------------------------------------------------------------


class MemInfo(BaseModel):
    """The /proc/meminfo fields that matter, in bytes."""

    total: int
    free: int
    available: int
    cached: int = 0
    buffers: int = 0
    swap_total: int = 0
    swap_free: int = 0
    shmem: int = Field(0, description="Shmem: tmpfs and shared memory, counted in Cached, not reclaimable")

    @property
    def page_cache(self) -> int:
        return self.cached + self.buffers

    @property
    def reclaimable_page_cache(self) -> int:
        """Page cache the kernel can drop (``drop_caches``): Cached + Buffers less Shmem."""
        return max(0, self.page_cache - self.shmem)

    @property
    def swap_used(self) -> int:
        return self.swap_total - self.swap_free


def parse_meminfo(text: str) -> MemInfo:
    """Parse /proc/meminfo (``Key:   123 kB`` lines)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w[\w()]*):\s+(\d+)(?:\s+kB)?\s*$", line.strip())
        if m:
            values[m.group(1)] = int(m.group(2)) * 1024
    if "MemTotal" not in values:
        raise ValueError("not a /proc/meminfo text (no MemTotal)")
    free = values.get("MemFree", 0)
    return MemInfo(
        total=values["MemTotal"],
        free=free,
        available=values.get("MemAvailable", free),  # kernels before 3.14 have no MemAvailable
        cached=values.get("Cached", 0),
        buffers=values.get("Buffers", 0),
        swap_total=values.get("SwapTotal", 0),
        swap_free=values.get("SwapFree", 0),
        shmem=values.get("Shmem", 0),
    )


def read_meminfo() -> MemInfo:
    """This machine's memory: /proc/meminfo where there is one, else psutil."""
    path = Path("/proc/meminfo")
    if path.exists():
        return parse_meminfo(path.read_text())
    import psutil

    vm = psutil.virtual_memory()
    return MemInfo(total=vm.total, free=vm.free, available=vm.available, cached=getattr(vm, "cached", 0))


def read_psi_avg10(path: Path = PSI_MEMORY, *, kind: Literal["some", "full"] = "some") -> float | None:
    """``avg10`` of the kernel's memory pressure line ``kind``; None where the kernel has no PSI."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if not line.startswith(kind):
            continue
        for part in line.split():
            if part.startswith("avg10="):
                try:
                    return float(part.split("=", 1)[1])
                except ValueError:
                    return None
    return None


# ---- disk and the Hugging Face cache ------------------------------------------------------------


def hf_cache_dir(explicit: str | None = None) -> Path:
    """The host's HF home: ``explicit`` (``--hf-cache``), else ``HF_HOME``, else ~/.cache/huggingface."""
    return hf_home(explicit)


def existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest parent that exists (a folder not made yet sits on that filesystem)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_free(path: Path) -> int:
    """Free bytes on the filesystem that holds (or will hold) ``path``."""
    return shutil.disk_usage(existing_ancestor(path)).free


# ---- GPUs through NVML ----------------------------------------------------------------------


class GpuInfo(BaseModel):
    index: int
    name: str
    total_bytes: int | None = Field(None, description="None where NVML says NotSupported (unified memory)")
    used_bytes: int | None = None
    free_bytes: int | None = None


class GpuProcess(BaseModel):
    pid: int
    gpu_index: int
    used_bytes: int | None = None
    name: str = ""


class NvmlReport(BaseModel):
    available: bool
    reason: str = Field("", description="Why NVML gave no answer (not installed, no driver, ...)")
    gpus: list[GpuInfo] = Field(default_factory=list)
    processes: list[GpuProcess] = Field(default_factory=list)
    memory_not_supported: bool = Field(
        False, description="nvmlDeviceGetMemoryInfo raised NotSupported (GB10 / unified memory)"
    )


def nvml_snapshot() -> NvmlReport:
    """GPUs and the processes using them, through NVML (package nvidia-ml-py, optional)."""
    try:
        nv = nvml_init()
    except NvmlUnavailable as exc:
        if exc.missing:
            reason = "NVML bindings are not installed (pip install nvidia-ml-py, or `llmdeck[gpu]`)"
        else:
            reason = f"NVML could not start: {exc.cause}"
        return NvmlReport(available=False, reason=reason)
    report = NvmlReport(available=True)
    try:
        for i in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            report.gpus.append(_gpu_info(nv, handle, i, report))
            report.processes += _gpu_processes(nv, handle, i)
    finally:
        nvml_shutdown(nv)
    return report


def _gpu_info(nv: Any, handle: Any, index: int, report: NvmlReport) -> GpuInfo:
    gpu = GpuInfo(index=index, name=_text(nv.nvmlDeviceGetName(handle)))
    try:
        mem = nv.nvmlDeviceGetMemoryInfo(handle)
        gpu.total_bytes, gpu.used_bytes, gpu.free_bytes = int(mem.total), int(mem.used), int(mem.free)
    except nv.NVMLError_NotSupported:
        report.memory_not_supported = True
    return gpu


def _gpu_processes(nv: Any, handle: Any, index: int) -> list[GpuProcess]:
    procs: list[Any] = []
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            procs += list(getattr(nv, getter)(handle))
        except Exception:  # NotSupported on some boards
            continue
    out: list[GpuProcess] = []
    seen: set[int] = set()
    for p in procs:
        if p.pid in seen:
            continue
        seen.add(p.pid)
        used = getattr(p, "usedGpuMemory", None)
        out.append(
            GpuProcess(
                pid=int(p.pid), gpu_index=index, used_bytes=int(used) if used else None, name=_pname(p.pid)
            )
        )
    return out


def _pname(pid: int) -> str:
    import psutil

    try:
        return " ".join(psutil.Process(pid).cmdline())[:120] or psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return ""


def nvml_versions() -> dict[str, str]:
    """The driver's version and the CUDA version it supports, through NVML (empty without NVML)."""
    out: dict[str, str] = {}
    try:
        with nvml_session() as nv:
            with contextlib.suppress(Exception):
                out["driver"] = _text(nv.nvmlSystemGetDriverVersion())
            with contextlib.suppress(Exception):
                cuda = int(nv.nvmlSystemGetCudaDriverVersion())
                out["cuda"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
    except NvmlUnavailable:
        return {}
    return out


class NvmlSampler:
    """NVML kept open to sample GPU memory over a run. Devices whose memory query is NotSupported
    (GB10) are recorded with ``NVML_NOT_REPORTED``, never as 0."""

    def __init__(self) -> None:
        self.ok = False
        self.names: list[str] = []
        self.totals: list[int | None] = []
        self.notes: list[str | None] = []
        self.note: str | None = None
        self._handles: list[Any] = []
        try:
            self._nv = nvml_init()
        except NvmlUnavailable as exc:
            if exc.missing:
                self.note = "GPU memory not sampled: nvidia-ml-py is not installed"
            else:  # NVMLError_LibraryNotFound, driver errors
                self.note = f"GPU memory not sampled: NVML unavailable ({type(exc.cause).__name__})"
            return
        self.ok = True
        for i in range(self._nv.nvmlDeviceGetCount()):
            h = self._nv.nvmlDeviceGetHandleByIndex(i)
            self.names.append(_text(self._nv.nvmlDeviceGetName(h)))
            self._handles.append(h)
            try:
                self.totals.append(int(self._nv.nvmlDeviceGetMemoryInfo(h).total))
                self.notes.append(None)
            except Exception:
                self.totals.append(None)
                self.notes.append(NVML_NOT_REPORTED)

    def used(self) -> list[int | None]:
        out: list[int | None] = []
        for h, note in zip(self._handles, self.notes, strict=True):
            if note is not None:
                out.append(None)
                continue
            try:
                out.append(int(self._nv.nvmlDeviceGetMemoryInfo(h).used))
            except Exception:
                out.append(None)
        return out


def wait_memory_settles(max_s: float = 30.0, step_s: float = 1.0) -> int:
    """After a stop, wait until MemAvailable stops rising (the engine's memory is back)."""
    last = read_meminfo().available
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        time.sleep(step_s)
        now = read_meminfo().available
        if now - last < 256 * MIB:
            return int(now)
        last = now
    return int(last)
