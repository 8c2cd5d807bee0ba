"""The KV cache as vLLM lays it out: one spec per layer, grouped by the hybrid allocator.

Followed from vLLM's source (vllm 0.22.0 wheel; 0.33.0 where it differs, see versions.py):

* per-layer specs (``vllm/v1/kv_cache_interface.py``): ``FullAttentionSpec`` / ``SlidingWindowSpec``
  page = ``block_size * num_kv_heads * (head_size + head_size_v) * dtype`` (lines 211-300, 448-470);
  ``MLAAttentionSpec`` page = ``block_size * 1 * (kv_lora_rank + qk_rope_head_dim) * dtype``, one
  latent vector instead of K and V (lines 326-352; ``fp8_ds_mla``: 656 B a token; the layer's
  spec: model_executor/layers/attention/mla_attention.py:960-970); ``MambaSpec`` page = the
  conv + SSM state, padded to the attention page (lines 562-593).
* blocks one request needs (``max_memory_usage_bytes``): full/MLA ``cdiv(max_model_len, block)``;
  sliding window ``cdiv(min(window - 1 + in_flight, max_model_len), block) + 1`` (lines 472-497);
  chunked local ``cdiv(min(chunk + in_flight, max_model_len), block)`` (lines 418-438), where
  ``in_flight`` is ``max_num_batched_tokens`` until 0.25 and from 0.26 that times the batches in flight
  (``VllmConfig.max_in_flight_tokens``; runner.max_in_flight_tokens); Mamba ``1 + spec`` blocks,
  ``2 + spec`` in align mode (prefix caching), in
  0.22's 'all' mode (prefix caching on Nemotron-H and the other Mamba-2 models) a state for every
  block of the context, ``cdiv(max_model_len, block) + spec`` (lines 582-591), and in align mode ``+ 1``
  prefill checkpoint block with FlashInfer GDN prefill from 0.33 and for every Mamba-2 mixer from 0.32
  (kv_cache_interface.py MambaSpec.max_memory_usage_bytes; kvlayout.MAMBA2_CHECKPOINT_SINCE).
  Attention sinks (gpt-oss) are a per-head parameter: no KV.
* grouping (``vllm/v1/core/kv_cache_utils.py``): all specs equal → one group (1618-1640); all
  full-attention-like or all one window → one ``UniformTypeKVCacheSpecs`` group; otherwise page
  sizes are unified (1012-1049) and layers grouped by spec into groups of ``min`` layers a type
  (``max`` when max < 1.5 × min), padding the last group of a type (1057-1176).
* memory → blocks: ``num_blocks = available // (page_size * group_size)`` (1236-1321, 935-952);
  ``max_concurrency = num_blocks / Σ_groups blocks_per_request`` (877-895) and the log's
  ``GPU KV cache size`` is ``int(max_concurrency * max_model_len)`` (1709-1738).
* block size: the attention backend's preferred size (platforms/interface.py:469-503;
  FLASH_ATTN/TRITON 16, FLASHMLA 64, FLASHINFER_MLA 32; platforms/cuda.py:79-147 for the order),
  then for Mamba hybrids the smallest multiple of the kernel alignment whose attention page
  holds one Mamba state (interface.py:505-650).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.versions import at_least

KERNEL_BLOCK_ALIGN = 16  # FLASH_ATTN / TRITON_ATTN: MultipleOf(16); also vLLM's default block size
FP8_DS_MLA_BYTES_PER_TOKEN = 656  # kv_cache_interface.py:338-345 (V3.2 custom fp8 MLA layout)
# CacheConfig.DEFAULT_BLOCK_SIZE: 16 through 0.33.0, 64 in 0.34.0 (config/cache.py:185), which every
# backend llmdeck models takes (get_preferred_block_size, v1/attention/backend.py:158-166).
DEFAULT_BLOCK_64_SINCE = "0.34.0"
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64  # vllm 0.33.0 v1/attention/backends/gdn_attn.py:34
GDN_MODEL_TYPES = ("qwen3_next", "qwen3_5")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVGroup(BaseModel):
    """One KV-cache group: layers sharing a block table."""

    kind: str = Field(..., description="full | mla | sliding | chunked | mamba")
    layers: int = Field(..., description="real layers in the group (the rest is padding)")
    block_size: int
    window: int | None = None

    def blocks_per_request(
        self, max_model_len: int, in_flight_tokens: int, mamba_blocks: int, mamba_all: bool = False
    ) -> int:
        if self.kind == "mamba":
            return cdiv(max_model_len, self.block_size) + mamba_blocks if mamba_all else mamba_blocks
        if self.kind == "sliding" and self.window:
            tokens = min(self.window - 1 + in_flight_tokens, max_model_len)
            return cdiv(tokens, self.block_size) + 1
        if self.kind == "chunked" and self.window:
            return cdiv(min(self.window + in_flight_tokens, max_model_len), self.block_size)
        return cdiv(max_model_len, self.block_size)


class KVLayout(BaseModel):
    """How vLLM lays out the KV cache for one model and settings (independent of the budget)."""

    kv_cache_dtype: str = Field("auto", description="the KV dtype vLLM resolves (checkpoint's, flag's)")
    kv_dtype_bytes: int
    attn_bytes_per_token_per_layer: int
    kv_bytes_per_token: int = Field(..., description="All attention layers, one token.")
    block_size: int
    block_size_how: str = ""
    hybrid: bool = Field(..., description="more than one KV-cache group (sliding window, Mamba)")
    mamba_state_bytes_per_layer: int = 0
    mamba_state_bytes_per_request: int = Field(0, description="All linear-attention layers, unpadded.")
    page_size_bytes: int
    group_size: int
    groups: list[KVGroup] = Field(default_factory=list)
    attention_groups: int
    mamba_groups: int
    bytes_per_block: int
    mamba_blocks_per_group: int = Field(
        0, description="a request's Mamba blocks (in 'all' mode: beyond its context's)"
    )
    mamba_cache_mode: str = "none"
    in_flight_tokens: int = Field(
        8192, description="tokens a sliding-window or chunked group holds beyond its window (see above)"
    )

    def blocks_per_request(self, max_model_len: int) -> int:
        every = self.mamba_cache_mode == "all"
        return sum(
            g.blocks_per_request(max_model_len, self.in_flight_tokens, self.mamba_blocks_per_group, every)
            for g in self.groups
        )

    def max_model_len_for_blocks(self, num_blocks: int, limit: int = 1 << 24) -> int:
        """Largest context one request can have with ``num_blocks`` blocks (0 if none)."""
        if num_blocks <= 0 or self.blocks_per_request(1) > num_blocks:
            return 0
        lo, hi = 1, limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.blocks_per_request(mid) <= num_blocks:
                lo = mid
            else:
                hi = mid - 1
        return lo


def kv_dtype_bytes(facts: ModelFacts, kv_cache_dtype: str) -> int:
    from llmdeck.plan.modelinfo import DTYPE_BYTES

    if kv_cache_dtype in {"auto", ""}:
        return facts.dtype_bytes
    if kv_cache_dtype.startswith("fp8"):
        return 1
    return DTYPE_BYTES.get(kv_cache_dtype, facts.dtype_bytes)


def resolve_kv_cache_dtype(facts: ModelFacts, flag: str) -> str:
    """``auto`` means the checkpoint's KV quantization when it declares one (ModelOpt
    ``kv_cache_quant_algo`` FP8, compressed-tensors ``kv_cache_scheme``): vllm 0.22.0
    utils/torch_utils.py:375-393 (resolve_kv_cache_dtype_string)."""
    if flag in {"auto", ""} and facts.quantization and facts.quantization.kv_cache_dtype:
        return facts.quantization.kv_cache_dtype
    return flag or "auto"


def mamba_state_bytes(facts: ModelFacts, tp: int, spec_tokens: int) -> int:
    """Gated-DeltaNet state of one layer: conv (model dtype) + SSM (``mamba_ssm_dtype``); a Mamba-2
    mixer's as vllm 0.22.0 mamba_utils.py:162-187 (mamba2_state_shape) shapes it."""
    if facts.mamba_num_heads:
        heads, hd, state = facts.mamba_num_heads, facts.mamba_head_dim, facts.ssm_state_size
        inner = facts.mamba_intermediate_size or heads * hd
        conv_dim = (inner + 2 * facts.mamba_n_groups * state) // tp
        conv = conv_dim * (facts.mamba_conv_kernel - 1 + spec_tokens) * facts.dtype_bytes
        return conv + heads // tp * hd * state * facts.ssm_dtype_bytes
    nk, nv = facts.linear_num_key_heads // tp, facts.linear_num_value_heads // tp
    dk, dv = facts.linear_key_head_dim, facts.linear_value_head_dim
    conv_dim = 2 * nk * dk + nv * dv
    conv = conv_dim * (facts.linear_conv_kernel_dim - 1 + spec_tokens) * facts.dtype_bytes
    return conv + nv * dk * dv * facts.ssm_dtype_bytes


def attention_bytes_per_token(facts: ModelFacts, kv_dtype: str, tp: int) -> int:
    """One attention layer, one token (the spec's page size for block_size 1)."""
    kvb = kv_dtype_bytes(facts, kv_dtype)
    if facts.use_mla:
        if kv_dtype == "fp8_ds_mla":
            return FP8_DS_MLA_BYTES_PER_TOKEN
        return facts.kv_head_size * kvb
    kv_heads = max(1, facts.num_key_value_heads // tp)
    return 2 * kv_heads * facts.head_dim * kvb


def backend_block_size(
    facts: ModelFacts, kv_dtype: str, cc_major: int | None, version: str | None = None
) -> tuple[int, str]:
    """Phase 1 of ``update_block_size_for_backend``: the first usable backend's preferred size (vLLM's
    default block when the backend takes it: 16 until 0.33, 64 from 0.34)."""
    if at_least(version, DEFAULT_BLOCK_64_SINCE):
        return 64, "vLLM >= 0.34 default 64 (FLASH_ATTN, FLASHINFER, TRITON and the MLA backends take it)"
    if not facts.use_mla:
        return KERNEL_BLOCK_ALIGN, "FLASH_ATTN/FLASHINFER/TRITON_ATTN default 16"
    quantized = kv_dtype not in {"auto", "bfloat16", "float16"}
    if cc_major == 9 and quantized:
        return 64, "FLASHMLA (FLASH_ATTN_MLA has no fp8 KV): 64"
    if cc_major == 10:
        return 32, "FLASHINFER_MLA on Blackwell: 32"
    return KERNEL_BLOCK_ALIGN, "FLASH_ATTN_MLA (Hopper) / TRITON_MLA: 16"


def gdn_flashinfer(facts: ModelFacts, gdn_backend: str | None, cc_major: int | None) -> bool:
    """vllm 0.33.0 qwen_gdn_linear_attn.py:148-200: FlashInfer GDN prefill on Hopper, and on
    Blackwell (SM10/SM12) when linear_key_head_dim is 128, unless another backend is asked for."""
    if not facts.model_type.startswith(GDN_MODEL_TYPES) or gdn_backend not in (None, "auto", "flashinfer"):
        return False
    return cc_major == 9 or (cc_major in (10, 12) and facts.linear_key_head_dim == 128)


def hybrid_block_size(
    facts: ModelFacts,
    base: int,
    attn_tok: int,
    mamba_page: int,
    *,
    mode: str,
    v033: bool,
    flashinfer_gdn: bool,
    chunk: int,
) -> int:
    """``_align_hybrid_block_size`` (0.22.0 interface.py:505-650; 0.33.0 adds the FlashInfer GDN
    checkpoint alignment of 64 in align mode and 128 for MLA hybrids). In 0.22's 'all' mode the
    block is a multiple of the Mamba chunk (``lcm(chunk, alignment)``, interface.py:624-633)."""
    align = max(KERNEL_BLOCK_ALIGN, base)
    if v033 and facts.use_mla:
        align = max(align, 128)
    if v033 and mode == "align" and flashinfer_gdn:
        align = math.lcm(align, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
    if mode == "all":
        step = math.lcm(chunk, align)
        return max(base, step * cdiv(cdiv(mamba_page, attn_tok), step))
    attn_block = align * cdiv(mamba_page, align * attn_tok)
    return max(base, attn_block)
