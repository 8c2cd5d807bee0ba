"""The engine settings that shape memory, resolved from flags, machine, model and vLLM version."""

from __future__ import annotations

from pydantic import BaseModel, Field

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vllm/config/cache.py (vllm PR #38284)


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

    @property
    def mamba_cache_mode(self) -> str:
        return "align" if self.enable_prefix_caching else "none"
