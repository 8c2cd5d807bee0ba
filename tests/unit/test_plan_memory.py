"""The memory plan against real vLLM 0.22.0 start-up logs (H200 fixtures) and seed 004's GB10 logs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmdeck.formats.model_folder import read_model_config
from llmdeck.plan.machine import GIB, dgx_spark, h200
from llmdeck.plan.memory import ServeSettings, kv_capacity, kv_layout, plan_memory
from llmdeck.plan.modelinfo import ModelFacts, facts_from_config
from repo_paths import ROOT, SHARED

CONFIGS = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs"
FIXTURES = SHARED / "fixtures"
H200_LOGS = FIXTURES / "vllm-0.22.0-h200"


def facts(name: str) -> ModelFacts:
    return facts_from_config(read_model_config(CONFIGS / f"{name}.config.json"), source=name)


def startup_numbers(log: Path) -> dict[str, float]:
    """The lines vLLM prints at start-up, parsed from a real log."""
    text = log.read_text(encoding="utf-8", errors="replace")
    out: dict[str, float] = {}
    pats = {
        "available_gib": r"Available KV cache memory: ([\d.]+) GiB",
        "tokens": r"GPU KV cache size: ([\d,]+) tokens",
        "concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
        "weights_gib": r"Model loading took ([\d.]+) GiB",
        "block": r"Setting attention block size to (\d+) tokens",
    }
    for key, pat in pats.items():
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1).replace(",", ""))
    return out


needs_fixtures = pytest.mark.skipif(not H200_LOGS.is_dir(), reason="shared fixtures not present")

SEED000 = ServeSettings(
    max_model_len=131072,
    gpu_memory_utilization=0.85,
    kv_cache_dtype="fp8",
    max_num_seqs=8,
    max_num_batched_tokens=4096,
    enable_prefix_caching=True,
    vllm_version="0.22.0",
)


def test_bundled_configs_are_the_public_fixture_configs() -> None:
    if not (FIXTURES / "configs").is_dir():
        pytest.skip("shared fixtures not present")
    for f in (FIXTURES / "configs").glob("*.json"):
        assert (CONFIGS / f.name).read_bytes() == f.read_bytes()


def test_model_facts_hybrid_and_text_config_nesting() -> None:
    f = facts("Qwen3.6-35B-A3B")
    assert f.architecture == "Qwen3_5MoeForConditionalGeneration"
    assert f.is_hybrid and f.is_moe and f.has_vision
    assert (f.full_attention_layers, f.linear_attention_layers) == (10, 30)
    assert f.ssm_dtype_bytes == 4 and f.head_dim == 256 and f.num_key_value_heads == 2
    dense = facts("Qwen3-0.6B")
    assert not dense.is_hybrid and not dense.is_moe and dense.full_attention_layers == 28


def test_full_attention_interval_without_layer_types() -> None:
    cfg = read_model_config(CONFIGS / "Qwen3.6-35B-A3B.config.json")
    del cfg["text_config"]["layer_types"]
    f = facts_from_config(cfg, source="x")
    assert f.full_attention_layers == 10 and f.layer_types[3] == "full_attention"


def test_kv_bytes_per_token_match_vllm_facts() -> None:
    # vllm-facts.md, KV cache sizing: Qwen3-30B-A3B 96 KiB/token bf16; Qwen3.5/3.6-35B 20 KiB bf16
    s = ServeSettings(max_model_len=8192)
    assert kv_layout(facts("Qwen3-30B-A3B"), s).kv_bytes_per_token == 96 * 1024
    assert kv_layout(facts("Qwen3.6-35B-A3B"), s).kv_bytes_per_token == 20 * 1024


@pytest.mark.parametrize(("kv_dtype", "block"), [("auto", 1056), ("fp8", 2096)])
def test_hybrid_block_size_matches_vllm(kv_dtype: str, block: int) -> None:
    s = SEED000.model_copy(update={"kv_cache_dtype": kv_dtype})
    assert kv_layout(facts("Qwen3.6-35B-A3B"), s).block_size == block


@pytest.mark.parametrize(("kv_dtype", "block", "triton_block"), [("auto", 1088, 1056), ("fp8", 2112, 2096)])
def test_hybrid_block_size_in_vllm_033_rounds_to_64_with_flashinfer_gdn(
    kv_dtype: str, block: int, triton_block: int
) -> None:
    # vllm 0.33.0 platforms/interface.py _align_hybrid_block_size: lcm(16, 64) in align mode with
    # FlashInfer GDN prefill (Hopper's default); MambaSpec keeps one prefill-checkpoint block more
    s = SEED000.model_copy(update={"kv_cache_dtype": kv_dtype, "vllm_version": "0.33.0"})
    lay = kv_layout(facts("Qwen3.6-35B-A3B"), s)
    assert lay.block_size == block and lay.mamba_blocks_per_group == 3
    triton = kv_layout(facts("Qwen3.6-35B-A3B"), s.model_copy(update={"gdn_prefill_backend": "triton"}))
    assert triton.block_size == triton_block and triton.mamba_blocks_per_group == 2


@needs_fixtures
def test_weights_match_model_loading_lines() -> None:
    small = startup_numbers(H200_LOGS / "vllm-serve-startup-and-run.log")
    hybrid = startup_numbers(H200_LOGS / "hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log")
    assert facts("Qwen3-0.6B").weight_bytes() / GIB == pytest.approx(small["weights_gib"], rel=0.01)
    assert facts("Qwen3.6-35B-A3B").weight_bytes() / GIB == pytest.approx(hybrid["weights_gib"], rel=0.01)


@needs_fixtures
def test_kv_math_given_vllms_available_memory_dense() -> None:
    log = startup_numbers(H200_LOGS / "vllm-serve-startup-and-run.log")
    s = ServeSettings(max_model_len=8192)
    lay = kv_layout(facts("Qwen3-0.6B"), s)
    cap = kv_capacity(lay, int(log["available_gib"] * GIB), 8192)
    assert lay.block_size == 16
    assert cap.kv_cache_tokens == pytest.approx(log["tokens"], rel=1e-4)
    assert round(cap.max_concurrency, 2) == pytest.approx(log["concurrency"], abs=0.011)


@needs_fixtures
def test_kv_math_given_vllms_available_memory_hybrid_seed000() -> None:
    log = startup_numbers(H200_LOGS / "hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log")
    lay = kv_layout(facts("Qwen3.6-35B-A3B"), SEED000)
    assert lay.block_size == log["block"] == 2096
    assert (lay.group_size, lay.attention_groups, lay.mamba_groups, lay.mamba_blocks_per_group) == (
        10,
        1,
        3,
        2,
    )
    # the log prints GiB with two decimals: allow half a hundredth either way
    for gib in (log["available_gib"] - 0.005, log["available_gib"] + 0.005):
        cap = kv_capacity(lay, int(gib * GIB), 131072)
        assert cap.blocks_per_request == 69
        assert cap.kv_cache_tokens == pytest.approx(log["tokens"], rel=0.002)
        assert cap.max_concurrency == pytest.approx(log["concurrency"], rel=0.002)


@needs_fixtures
def test_predicted_available_memory_matches_h200_logs() -> None:
    small = startup_numbers(H200_LOGS / "vllm-serve-startup-and-run.log")
    p = plan_memory(facts("Qwen3-0.6B"), ServeSettings(max_model_len=8192), h200())
    assert p.available_kv_gib == pytest.approx(small["available_gib"], rel=0.01)
    assert p.capacity.kv_cache_tokens == pytest.approx(small["tokens"], rel=0.02)
    hybrid = startup_numbers(H200_LOGS / "hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log")
    p = plan_memory(facts("Qwen3.6-35B-A3B"), SEED000, h200())
    assert p.available_kv_gib == pytest.approx(hybrid["available_gib"], rel=0.01)
    assert p.capacity.kv_cache_tokens == pytest.approx(hybrid["tokens"], rel=0.02)
    assert p.capacity.max_concurrency == pytest.approx(hybrid["concurrency"], rel=0.02)


def test_gb10_seed004_qwen36_fp8_log() -> None:
    # seed 004 §5.1 (vLLM 0.22.0 venv on DGX Spark, default utilization 0.92, no prefix caching):
    # Model loading took 33.38 GiB, Available KV cache memory: 74.67 GiB, 3,795,968 tokens, 28.96x
    cfg = read_model_config(CONFIGS / "Qwen3.6-35B-A3B.config.json")
    cfg["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    f = facts_from_config(cfg, source="fp8")
    s = ServeSettings(
        max_model_len=131072, enable_prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=2048
    )
    lay = kv_layout(f, s)
    assert lay.block_size == 1056
    cap = kv_capacity(lay, int(74.67 * GIB), 131072)
    assert cap.blocks_per_request == 128
    assert cap.kv_cache_tokens == pytest.approx(3_795_968, rel=0.001)
    p = plan_memory(f, s, dgx_spark())
    assert p.weights_gib == pytest.approx(33.38, rel=0.01)
    assert p.capacity.kv_cache_tokens == pytest.approx(3_795_968, rel=0.02)


def test_kv_budget_given_skips_the_overhead_model() -> None:
    s = SEED000.model_copy(update={"kv_cache_memory_gib": 52.73})
    p = plan_memory(facts("Qwen3.6-35B-A3B"), s, h200())
    assert p.kv_source == "given" and p.available_kv_gib == pytest.approx(52.73)
    assert p.capacity.max_concurrency == pytest.approx(38.23, abs=0.02)


def test_context_beyond_memory_reports_what_fits() -> None:
    s = ServeSettings(max_model_len=262144, gpu_memory_utilization=0.5)
    p = plan_memory(facts("Qwen3-30B-A3B"), s, h200(), target_concurrency=1)
    assert not p.fits
    assert 0 < p.max_context_one_request < 262144
    assert p.utilization_for_context is not None and p.utilization_for_context > 0.5
    # the suggested utilization really holds the context
    s2 = s.model_copy(update={"gpu_memory_utilization": p.utilization_for_context})
    assert plan_memory(facts("Qwen3-30B-A3B"), s2, h200()).fits
