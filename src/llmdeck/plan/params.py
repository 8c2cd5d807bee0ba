"""Parameter counts and weight bytes of the language model vLLM loads, module by module.

Each module is counted as vLLM's model file builds it (vllm 0.22.0 model_executor/models/):
GQA attention with optional biases, output gate and q/k norms (qwen3*.py, llama.py, gpt_oss.py:
sinks and o_proj bias), MLA (deepseek_v2.py DeepseekV2MLAAttention: q_a/q_b or q_proj,
kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj), Gated DeltaNet (qwen3_next.py), dense
MLPs, and MoE layers (router, experts, Qwen's gated shared expert, DeepSeek's
``n_shared_experts`` shared MLP, gpt-oss expert biases). The quantization scheme then prices each
module: quantized linear layers at the scheme's bytes per parameter (scales included), the rest
(embeddings, lm_head, norms, routers, ignored modules) at the model dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.plan.versions import at_least

if TYPE_CHECKING:
    from llmdeck.plan.modelinfo import ModelFacts

# (module path, parameters, quantizable linear?)
Module = tuple[str, int, bool]

GRANITE_HYBRID = "granitemoehybrid"  # Granite 4.0-H: every layer a mixer and a MoE/shared MLP


def _gqa_attention(f: ModelFacts, p: str) -> list[Module]:
    h, hd = f.hidden_size, f.head_dim
    q, kv = f.num_attention_heads * hd, f.num_key_value_heads * hd
    mods = [
        (f"{p}.self_attn.qkv_proj", h * q * (2 if f.attn_output_gate else 1) + 2 * h * kv, True),
        (f"{p}.self_attn.o_proj", q * h, True),
    ]
    small = 2 * hd if f.qk_norm else 0
    if f.attention_bias:
        small += q + 2 * kv + (h if f.attention_sinks else 0)
    if f.attention_sinks:
        small += f.num_attention_heads
    if small:
        mods.append((f"{p}.self_attn.norms", small, False))
    return mods


def _mla_attention(f: ModelFacts, p: str) -> list[Module]:
    h, n = f.hidden_size, f.num_attention_heads
    qk_head = f.qk_nope_head_dim + f.qk_rope_head_dim
    mods: list[Module] = []
    if f.q_lora_rank:
        mods.append((f"{p}.self_attn.q_a_proj", h * f.q_lora_rank, True))
        mods.append((f"{p}.self_attn.q_b_proj", f.q_lora_rank * n * qk_head, True))
    else:
        mods.append((f"{p}.self_attn.q_proj", h * n * qk_head, True))
    mods.append((f"{p}.self_attn.kv_a_proj_with_mqa", h * (f.kv_lora_rank + f.qk_rope_head_dim), True))
    mods.append((f"{p}.self_attn.kv_b_proj", f.kv_lora_rank * n * (f.qk_nope_head_dim + f.v_head_dim), True))
    mods.append((f"{p}.self_attn.o_proj", n * f.v_head_dim * h, True))
    mods.append((f"{p}.self_attn.norms", f.kv_lora_rank + f.q_lora_rank, False))
    return mods


def _linear_attention(f: ModelFacts, p: str) -> list[Module]:
    h = f.hidden_size
    nk, nv = f.linear_num_key_heads, f.linear_num_value_heads
    dk, dv = f.linear_key_head_dim, f.linear_value_head_dim
    conv_dim = 2 * nk * dk + nv * dv
    return [
        (f"{p}.linear_attn.in_proj_qkvz", h * (2 * nk * dk + 2 * nv * dv), True),
        (f"{p}.linear_attn.in_proj_ba", h * 2 * nv, True),
        (f"{p}.linear_attn.out_proj", nv * dv * h, True),
        (f"{p}.linear_attn.conv1d", conv_dim * f.linear_conv_kernel_dim, False),
        (f"{p}.linear_attn.norms", 2 * nv + dv, False),
    ]


def _mlp(f: ModelFacts, p: str, i: int) -> list[Module]:
    h = f.hidden_size
    if not f.moe_layer(i):
        return [(f"{p}.mlp", 3 * h * f.intermediate_size, True)]
    e, inter = f.num_experts, f.moe_intermediate_size
    mods: list[Module] = [
        (f"{p}.mlp.gate", h * e + (e if f.expert_bias else 0), False),
        (f"{p}.mlp.experts", e * 3 * h * inter, True),
    ]
    if f.expert_bias:
        mods.append((f"{p}.mlp.experts.bias", e * (2 * inter + h), False))
    if f.shared_expert_intermediate_size:
        mods.append((f"{p}.mlp.shared_expert", 3 * h * f.shared_expert_intermediate_size, True))
        mods.append((f"{p}.mlp.shared_expert_gate", h, False))
    if f.n_shared_experts:
        mods.append((f"{p}.mlp.shared_experts", 3 * h * inter * f.n_shared_experts, True))
    return mods


def _nemotron_h_block(f: ModelFacts, p: str, layer_type: str) -> list[Module]:
    """One Nemotron-H layer: a norm and ONE mixer (vllm 0.22.0 models/nemotron_h.py): a Mamba-2 mixer
    (in_proj to 2 x inner + 2 x groups x state + heads, conv1d with bias, A/D/dt_bias, a gated norm,
    out_proj), attention, a non-gated (relu2) MLP, or a MoE of such experts."""
    h = f.hidden_size
    mods: list[Module] = [(f"{p}.norm", h, False)]
    if layer_type == "linear_attention":
        mods += _mamba2_mixer(f, p)
    elif layer_type == "mlp":
        mods.append((f"{p}.mixer", 2 * h * f.intermediate_size, True))
    elif layer_type == "moe":  # relu2 experts (up, down), a router, the shared expert(s)
        e, shared = f.num_experts, f.shared_expert_intermediate_size * max(1, f.n_shared_experts)
        mods += [
            (f"{p}.mlp.gate", h * e + e, False),
            (f"{p}.mlp.experts", e * 2 * h * f.moe_intermediate_size, True),
            (f"{p}.mlp.shared_experts", 2 * h * shared, True),
        ]
    else:
        mods += _gqa_attention(f, p)
    return mods


def _mamba2_mixer(f: ModelFacts, p: str) -> list[Module]:
    """vLLM's MambaMixer2: in_proj to 2 x inner + 2 x groups x state + heads, conv1d with bias,
    A/D/dt_bias, a gated norm over the inner width, out_proj."""
    h, heads = f.hidden_size, f.mamba_num_heads
    inner = f.mamba_intermediate_size or heads * f.mamba_head_dim
    conv_dim = inner + 2 * f.mamba_n_groups * f.ssm_state_size
    return [
        (f"{p}.mixer.in_proj", h * (inner + conv_dim + heads), True),
        (f"{p}.mixer.conv1d", conv_dim * (f.mamba_conv_kernel + 1), False),
        (f"{p}.mixer.ssm", 3 * heads + inner, False),
        (f"{p}.mixer.out_proj", inner * h, True),
    ]


def _granite_hybrid_block(f: ModelFacts, p: str, layer_type: str) -> list[Module]:
    """One Granite 4 hybrid layer (vllm 0.22.0 models/granitemoehybrid.py:55-220): two norms, a Mamba-2
    mixer or attention, then a MoE (a router without bias, experts with gate+up and down) when the
    config has experts, and the shared MLP (gate+up, down) when it has a shared width."""
    h, e = f.hidden_size, f.num_experts
    mods: list[Module] = [(f"{p}.norms", 2 * h, False)]
    mods += _mamba2_mixer(f, p) if layer_type == "linear_attention" else _gqa_attention(f, p)
    if e:
        mods += [
            (f"{p}.mlp.gate", h * e, False),
            (f"{p}.mlp.experts", e * 3 * h * f.moe_intermediate_size, True),
        ]
    if f.shared_expert_intermediate_size:
        mods.append((f"{p}.mlp.shared_mlp", 3 * h * f.shared_expert_intermediate_size, True))
    return mods


def modules(f: ModelFacts) -> list[Module]:
    """Every parameter-holding module of the language model (no vision tower, no MTP head)."""
    h = f.hidden_size
    mods: list[Module] = [("model.embed_tokens", f.vocab_size * h, False), ("model.norm", h, False)]
    if not f.tie_word_embeddings:
        mods.append(("lm_head", f.vocab_size * h, False))
    for i, layer_type in enumerate(f.types):
        p = f"model.layers.{i}"
        if f.mamba_num_heads and f.model_type == GRANITE_HYBRID:
            mods += _granite_hybrid_block(f, p, layer_type)
            continue
        if f.mamba_num_heads:
            mods += _nemotron_h_block(f, p, layer_type)
            continue
        mods.append((f"{p}.norms", 2 * h, False))
        if layer_type == "linear_attention":
            mods += _linear_attention(f, p)
        elif f.use_mla:
            mods += _mla_attention(f, p)
        else:
            mods += _gqa_attention(f, p)
        mods += _mlp(f, p, i)
    return mods


def language_model_params(f: ModelFacts) -> int:
    """Parameters of the language model vLLM loads."""
    return sum(n for _, n, _ in modules(f))


MXFP4_SCALES_FREED_IN = "0.25.0"


def mxfp4_kernel_extra_bytes(f: ModelFacts, compute_capability_major: int | None, vllm: str | None) -> int:
    """What the TRITON MXFP4 MoE kernel (gpt-oss on Hopper) keeps besides the checkpoint's tensors.

    vllm 0.22.0 quantization/mxfp4.py:339-351: for TRITON backends the swizzled scales go into a
    precision config while ``w13_weight_scale``/``w2_weight_scale`` stay registered — one more
    copy of every e8m0 scale (1/32 B a parameter) until vLLM 0.25 deletes them (0.25.0
    oracle/mxfp4.py:1150-1156; 0.24.0 keeps them) — and oracle/mxfp4.py:1144-1150 turns the expert
    biases into fp32 copies. Hopper picks TRITON (triton_kernels ships in the wheel; the FlashInfer
    TRTLLM kernels need SM100): oracle/mxfp4.py:270-290. The swizzled scales are padded: triton_kernels'
    HopperMXScaleLayout (0.22.0 and 0.26.0) rounds each expert's output rows up to 256
    (:data:`HOPPER_SCALE_ROWS`): 0.12 GiB on gpt-oss-120b. Seen: gpt-oss-120b loads 64.67 GiB (0.22),
    61.43 (0.26); the plan says 0.36 and 0.45 GiB less (evidence/plan/families/results-v0.22-compiled).
    """
    q = f.quantization
    if q is None or q.scheme != "mxfp4" or compute_capability_major != 9:
        return 0
    scales_kept = not at_least(vllm, MXFP4_SCALES_FREED_IN)
    total = 0
    for name, n, linear in modules(f):
        if name.endswith(".mlp.experts") and linear and not q.keeps_dtype(name):
            total += n // 32 if scales_kept else 0
            total += _hopper_scale_padding(f)
        elif name.endswith(".mlp.experts.bias"):
            total += n * 2
    return total


HOPPER_SCALE_ROWS = 256  # HopperMXScaleLayout.swizzle_data: SWIZZLE_ALIGN_M = 2 * num_warps(8) * 2 * 8


def _hopper_scale_padding(f: ModelFacts) -> int:
    """Bytes the Hopper scale swizzle adds to one MoE layer's e8m0 scales: w13 [E, 2I, H/32] and
    w2 [E, H, I/32], each expert's rows rounded up to :data:`HOPPER_SCALE_ROWS`."""
    h, inter = f.hidden_size, f.moe_intermediate_size

    def pad(rows: int) -> int:
        return -rows % HOPPER_SCALE_ROWS

    return f.num_experts * (pad(2 * inter) * (h // 32) + pad(h) * (inter // 32))


def weight_bytes(f: ModelFacts, *, language_model_only: bool = True) -> int:
    """Bytes of weights: the safetensors index when known, else each module priced by the scheme."""
    if f.checkpoint_bytes:
        total = f.checkpoint_bytes
        if f.has_vision and language_model_only:
            total -= f.vision_params * f.dtype_bytes
        return max(total, 0)
    q = f.quantization
    total_f = 0.0
    for name, n, linear in modules(f):
        if q is not None and linear and q.quantizes(name):
            total_f += n * q.bytes_per_param(name)
        else:
            total_f += n * f.dtype_bytes
    total = int(total_f)
    if f.has_vision and not language_model_only:
        total += f.vision_params * f.dtype_bytes
    return total
