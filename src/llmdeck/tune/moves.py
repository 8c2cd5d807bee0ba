"""First moves: configs the workload argues for, tried before the sampler's own proposals.

A start costs minutes on a GPU (the H200 tune of session 13 spent 240-333 s on each: compiling per
prefill-chunk size, the profiling run, CUDA graphs), so a budget holds a handful of trials and a
sampler's random start-up proposals rarely reach the one change that matters. Each move here is vLLM's
defaults on every axis but one idea, with its reason; it is handed to optuna as an enqueued trial, so
it counts as a search trial and the sampler learns from its score.

The one idea today: **prefix caching where the defaults leave it off and the traffic repeats
prefixes.** vLLM turns prefix caching on by default for hybrid (Gated DeltaNet / Mamba) models only
since 0.28 (vllm PR #50991, plan's ``HYBRID_PREFIX_CACHING_DEFAULT_SINCE``); the H200 log of the
Qwen3.6-35B-A3B-FP8 defaults says ``enable_prefix_caching=False`` and its prefix-cache hit rate 0.0%,
while the agent sessions (one shared system prompt, each turn resending the conversation) hit ~50%
with it on. With it on, the hybrid's cache runs in align mode, which schedules prefill in whole
attention blocks, so the chunk is the smallest multiple of the block size (for the defaults' KV dtype)
at or above vLLM's default chunk (``evidence/tune/h200/``). The move is not made where vLLM < 0.28
would take the 'all' Mamba mode instead (Nemotron-H and the other Mamba-2 models: a state per block,
results-round2 row 9: a quarter of the capacity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.engines import get as get_engine
from llmdeck.tune.schema import Dimension, ParamValue, TuneRequest
from llmdeck.tune.space import CUDAGRAPH

if TYPE_CHECKING:
    from llmdeck.plan.planner import Plan
    from llmdeck.tune.prune import Pruner

PREFIX_WORKLOADS = frozenset({"agent", "multi-user", "prompts"})


def defaults_of(plan: Plan, dims: list[Dimension]) -> dict[str, ParamValue]:
    """vLLM's own value on each axis of the space, as plan resolves it for this model and machine."""
    s = plan.settings
    known: dict[str, ParamValue] = {
        "max-num-seqs": s.max_num_seqs,
        "max-num-batched-tokens": s.max_num_batched_tokens,
        "enable-prefix-caching": s.enable_prefix_caching,
        "gpu-memory-utilization": s.gpu_memory_utilization,
        "kv-cache-dtype": s.kv_cache_dtype,
        # on by default on GPU (vLLM 0.22's H200 logs: "Asynchronous scheduling is enabled")
        "async-scheduling": True,
        CUDAGRAPH: "default",
    }
    return {d.name: known[d.name] for d in dims if d.name in known}


def defaults_point(plan: Plan, dims: list[Dimension]) -> dict[str, ParamValue] | None:
    """vLLM's defaults as a point of the space, or None when one of them is not among its axis's values."""
    point = defaults_of(plan, dims)
    if len(point) < len(dims) or any(point[d.name] not in d.values for d in dims):
        return None
    return point


def prefix_caching_move(
    req: TuneRequest, plan: Plan, dims: list[Dimension]
) -> tuple[dict[str, ParamValue], str] | None:
    """Defaults + prefix caching (+ a block-multiple chunk on hybrids), when it is a move at all."""
    if req.workload not in PREFIX_WORKLOADS or plan.settings.enable_prefix_caching:
        return None
    if plan.facts.is_hybrid and plan.settings.mamba_prefix_mode == "all":
        return None  # vLLM < 0.28 on Nemotron-H & co: prefix caching means 'all' mode, ~1/3.5 the capacity
    point = defaults_point(plan, dims)
    if point is None or "enable-prefix-caching" not in point:
        return None
    point["enable-prefix-caching"] = True
    why = "the traffic repeats prefixes and vLLM's defaults leave prefix caching off for this model"
    if plan.facts.is_hybrid and "max-num-batched-tokens" in point:
        block = plan.memory.layout.block_size
        default = plan.settings.max_num_batched_tokens
        axis = sorted(int(str(v)) for v in next(d for d in dims if d.name == "max-num-batched-tokens").values)
        whole = [v for v in axis if v % block == 0 and v >= default]
        if not whole:  # a smaller chunk would queue the first turns (the H200 run's trial 3)
            return None
        point["max-num-batched-tokens"] = whole[0]
        why += f" (hybrid: whole {block}-token blocks per prefill chunk in align mode)"
    return point, why


def first_moves(
    req: TuneRequest, pruner: Pruner, base_args: list[str], dims: list[Dimension]
) -> list[tuple[dict[str, ParamValue], str]]:
    """The moves for this tune, each with why; none on the CPU engine (prefix caching is on there)."""
    if get_engine(req.base.engine).runs_on_cpu:
        return []
    plan = pruner.plan(base_args, {})
    moves = [prefix_caching_move(req, plan, dims)]
    return [m for m in moves if m is not None]
