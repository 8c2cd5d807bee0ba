"""The error of a plan that does not fit, with what would: a shorter context, another utilization, or
(where the overheads the flags ask for outweigh the model) smaller batches."""

from __future__ import annotations

from llmdeck.errors import PlanError
from llmdeck.plan.memory import MemoryPlan


def no_fit_error(memory: MemoryPlan, model: str) -> PlanError:
    if memory.available_kv_gib <= 0:
        msg = (
            f"{model} does not fit: weights {memory.weights_gib:.2f} GiB plus overheads "
            f"{memory.overhead.total_gib:.2f} GiB exceed the {memory.requested_gib:.2f} GiB that "
            f"--gpu-memory-utilization {memory.gpu_memory_utilization} gives on {memory.machine} "
            f"({memory.total_gib} GiB)."
        )
    else:
        msg = (
            f"A {memory.max_model_len}-token context does not fit: one request needs "
            f"{memory.capacity.blocks_per_request} KV blocks but {memory.available_kv_gib:.2f} "
            "GiB of KV cache holds "
            f"{memory.capacity.num_blocks} on {memory.machine} at --gpu-memory-utilization "
            f"{memory.gpu_memory_utilization}."
        )
    options = _batches(memory)
    if memory.max_context_one_request > 0:
        options.append(f"--context {memory.max_context_one_request} fits at this utilization")
    if memory.utilization_for_context is not None:
        options.append(f"--gpu-memory-utilization {memory.utilization_for_context} would hold this context")
    hint = (
        "; ".join(options) if options else "pick a smaller or quantized model, or a machine with more memory"
    )
    return PlanError(msg + " What would fit instead: " + hint + ".", hint=None)


def _batches(memory: MemoryPlan) -> list[str]:
    """Smaller batches, where the overheads they cost are more than the weights (`--max-num-seqs
    10000000` had been told to pick a smaller model, with 5,660 GiB of overheads for a 0.6B one)."""
    o = memory.overhead
    if memory.available_kv_gib > 0 or o.total_gib <= memory.weights_gib:
        return []
    if o.sampler_gib + o.held_gib >= o.activation_gib:
        return [
            f"a lower --max-num-seqs (now {memory.max_num_seqs}: its sampler takes {o.sampler_gib:.1f} GiB)"
        ]
    return [
        f"a lower --max-num-batched-tokens (now {memory.max_num_batched_tokens}: its profiling pass takes "
        f"{o.activation_gib:.1f} GiB)"
    ]
