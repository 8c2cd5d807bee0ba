"""The engine settings that shape memory, resolved from flags, machine, model and vLLM version."""

from __future__ import annotations

from pydantic import BaseModel, Field

from llmdeck.plan.versions import at_least

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vllm/config/cache.py (vllm PR #38284)
# The architectures whose model class is SupportsMambaPrefixCaching in vllm 0.22.0 (models/*.py): under
# prefix caching vLLM keeps their Mamba state for every block ('all'); the others take 'align'.
MAMBA_ALL_MODE_ARCHS = frozenset({
    "BambaForCausalLM", "FalconH1ForCausalLM", "FalconMambaForCausalLM", "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM", "Mamba2ForCausalLM", "MambaForCausalLM", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "Zamba2ForCausalLM",
})  # fmt: skip
# 'all' is their default up to 0.27 (vllm PR #50991: 'align' from 0.28.0, models/config.py:603-604), asked
# for by name until 0.31 (deprecated in 0.30.0, PR #55041; gone from 0.32.0, PR #58997: config/cache.py:63
# MambaCacheMode = Literal["align", "none"]). Bounds from the released wheels on either side of each PR.
MAMBA_ALL_DEFAULT_UNTIL = "0.28.0"
MAMBA_ALL_MODE_UNTIL = "0.32.0"


class ServeSettings(BaseModel):
    """The engine settings that shape memory, resolved from flags, machine and model defaults."""

    max_model_len: int
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    nodes: int = Field(1, description="machines (plan --nodes)")
    gpus_per_node: int = Field(1, description="GPUs a machine (plan --gpus-per-node)")
    block_size: int | None = Field(None, description="--block-size when the user set one.")
    num_speculative_tokens: int = 0
    language_model_only: bool = True
    kv_cache_memory_gib: float | None = Field(None, description="A known KV budget (skips the model).")
    disable_hybrid_kv_cache_manager: bool = False
    gdn_prefill_backend: str | None = Field(None, description="--gdn-prefill-backend")
    compute_capability_major: int | None = Field(9, description="the GPU's CUDA compute capability (major)")
    vllm_version: str | None = Field(None, description="the target vLLM (None/unknown: newest checked)")
    mamba_prefix_mode: str = Field(
        "align", description="the Mamba cache mode vLLM takes under prefix caching: align | all"
    )
    mamba_block_size: int | None = Field(None, description="--mamba-block-size when the user set one.")
    async_scheduling: bool = Field(True, description="vLLM's async scheduling (on unless turned off)")
    cudagraphs: bool = Field(True, description="CUDA graphs unless cudagraph_mode NONE or -O0")
    cudagraph_capture_sizes: list[int] | None = Field(None, description="the capture sizes the user listed")
    max_cudagraph_capture_size: int | None = Field(None, description="the largest capture size the user set")

    @property
    def mamba_cache_mode(self) -> str:
        """vLLM's ``mamba_cache_mode``: none without prefix caching (0.22.0 models/config.py:337-398)."""
        return self.mamba_prefix_mode if self.enable_prefix_caching else "none"


def mamba_prefix_mode(architecture: str, asked: str | None, target_vllm: str | None) -> str:
    """The Mamba cache mode vLLM takes when prefix caching is on: 0.22.0 models/config.py:337-377
    (MambaModelConfig: 'all' by default for the SupportsMambaPrefixCaching models, 'align' for the rest
    and for an 'all' they cannot do); 'align' by default from :data:`MAMBA_ALL_DEFAULT_UNTIL` and the
    only mode from :data:`MAMBA_ALL_MODE_UNTIL` on."""
    until = MAMBA_ALL_MODE_UNTIL if asked == "all" else MAMBA_ALL_DEFAULT_UNTIL
    if asked == "align" or architecture not in MAMBA_ALL_MODE_ARCHS or at_least(target_vllm, until):
        return "align"
    return "all"
