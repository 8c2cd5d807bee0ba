"""Which GPU model runner vLLM starts a model on (V1 or V2), by vLLM version.

The runner decides the dummy sampler's share of the start-up memory profile (memory.sampler_bytes): V1
holds four [max_num_seqs, vocab] copies at its peak, V2 one. vLLM's rule moved release by release; the
table below was read off every released wheel from 0.22.0 to 0.34.0 (``vllm/config/vllm.py``:
``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``, ``use_v2_model_runner``, ``_is_default_v2_model_runner_model``
and ``_get_v2_model_runner_unsupported_features``):

- 0.22: Qwen3ForCausalLM only, not MoE, not quantized; hybrid/Mamba models unsupported.
- 0.23: Llama, Mistral and Qwen3 (dense), not MoE, not quantized.
- 0.24: those and DeepseekV2, Qwen2Moe, GraniteMoe, MoE and quantized ones included.
- 0.25-0.28: every non-MoE model and the listed MoE architectures; never a hybrid or attention-free model.
- 0.29-0.33: every model (0.30-0.31: not under the Mamba cache mode 'all').
- 0.34: V1 is gone (``v1/worker/gpu_model_runner.py`` removed).

``VLLM_USE_V2_MODEL_RUNNER`` overrides the rule in every release; llmdeck does not set it. An unknown
version follows the newest release checked (versions.NEWEST_CHECKED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.plan.versions import at_least

if TYPE_CHECKING:
    from llmdeck.plan.modelinfo import ModelFacts
    from llmdeck.plan.settings import ServeSettings

V2_FOR_EVERY_MODEL_SINCE = "0.29.0"
V2_FOR_EVERY_DENSE_SINCE = "0.25.0"
# 0.30.0 and 0.31.0 send a model under mamba_cache_mode 'all' back to V1 ('all' is gone from 0.32.0).
MAMBA_ALL_ON_V1 = ("0.30.0", "0.32.0")
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, by the release that first lists each (none is ever dropped
# from 0.25 on; 0.22-0.24 list dense architectures that 0.25 covers by "not MoE").
_LISTED_SINCE: dict[str, str] = {
    "DeepseekV2ForCausalLM": "0.24.0",
    "Qwen2MoeForCausalLM": "0.24.0",
    "GraniteMoeForCausalLM": "0.24.0",
    "InklingForCausalLM": "0.26.0",
    "InklingForConditionalGeneration": "0.26.0",
    "LongcatFlashNgramForCausalLM": "0.26.0",
    "KimiK3ForConditionalGeneration": "0.27.0",
    "DeepseekV4ForCausalLM": "0.28.0",
}
_DENSE_LISTED: dict[str, str] = {  # 0.22-0.24: listed dense architectures (0.22-0.23: unquantized only)
    "Qwen3ForCausalLM": "0.22.0",
    "LlamaForCausalLM": "0.23.0",
    "MistralForCausalLM": "0.23.0",
}


def _listed(table: dict[str, str], architecture: str, version: str | None) -> bool:
    since = table.get(architecture)
    return since is not None and at_least(version, since)


def uses_v2_model_runner(facts: ModelFacts, s: ServeSettings) -> bool:
    """Whether vLLM ``s.vllm_version`` starts this model on the V2 GPU model runner (else V1)."""
    v, arch = s.vllm_version, facts.architecture
    if at_least(v, V2_FOR_EVERY_MODEL_SINCE):
        in_all_gap = at_least(v, MAMBA_ALL_ON_V1[0]) and not at_least(v, MAMBA_ALL_ON_V1[1])
        return not (in_all_gap and facts.is_hybrid and s.mamba_cache_mode == "all")
    if facts.is_hybrid:
        return False
    if at_least(v, V2_FOR_EVERY_DENSE_SINCE):
        return not facts.is_moe or _listed(_LISTED_SINCE, arch, v)
    if at_least(v, "0.24.0"):
        return _listed(_DENSE_LISTED, arch, v) or _listed(_LISTED_SINCE, arch, v)
    return _listed(_DENSE_LISTED, arch, v) and not facts.is_moe and facts.quantization is None


IN_FLIGHT_SINCE = "0.26.0"  # VllmConfig.max_in_flight_tokens (0.25.1 reserves one batch)
# Speculative methods under which vLLM leaves async scheduling off by default (0.22.0 config/vllm.py:
# 947-957, 0.26.0 :1059-1107); the EAGLE/MTP/DFlash family and ngram_gpu keep it on, draft_model and
# dspark too from 0.28.0; from 0.33.0 only on the V1 model runner (v1_async_sched_incompat, :1651-1716),
# and 0.34.0 keeps it on under every method (:1610-1637). Each wheel's VllmConfig.__post_init__.
ASYNC_OFF_SPEC_METHODS = frozenset(
    {"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class"}
)
ASYNC_DRAFT_MODEL_SINCE, ASYNC_V1_ONLY_SINCE, ASYNC_ALWAYS_SINCE = "0.28.0", "0.33.0", "0.34.0"


def default_async_scheduling(facts: ModelFacts, s: ServeSettings, spec_method: str | None) -> bool:
    """Whether vLLM ``s.vllm_version`` turns async scheduling on when no flag says (speculation aside,
    it does)."""
    v = s.vllm_version
    if spec_method is None or at_least(v, ASYNC_ALWAYS_SINCE):
        return True
    if at_least(v, ASYNC_V1_ONLY_SINCE) and uses_v2_model_runner(facts, s):
        return True
    off = ASYNC_OFF_SPEC_METHODS - ({"draft_model"} if at_least(v, ASYNC_DRAFT_MODEL_SINCE) else set())
    return spec_method not in off


def max_in_flight_tokens(facts: ModelFacts, s: ServeSettings) -> int:
    """Tokens scheduled but not yet settled, which a sliding-window or chunked-local KV group holds
    beyond its window: one batch until 0.25; from 0.26 a batch per concurrent step (0.26.0
    config/vllm.py:512-531 max_concurrent_batches: async scheduling overlaps two steps, on V2 one more
    than the pipeline stages, on V1 two at one stage; without it, one per pipeline stage)."""
    if not at_least(s.vllm_version, IN_FLIGHT_SINCE):
        return s.max_num_batched_tokens
    pp = max(1, s.pipeline_parallel_size)
    if not s.async_scheduling:
        batches = pp
    elif uses_v2_model_runner(facts, s):
        batches = pp + 1
    else:
        batches = 2 if pp <= 1 else pp
    return batches * s.max_num_batched_tokens
