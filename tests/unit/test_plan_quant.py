"""``--quantization`` in the plan: online quantization priced as vLLM 0.22 loads it, and the lint
rules on methods vLLM refuses. (The weights against real vLLM: evidence/plan/online-quant/.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdeck.plan.quant import VLLM_QUANTIZATION_METHODS, online_quantization
from test_plan_lint import found, plan

GIB = 1 << 30


def weights(model: str, args: list[str]) -> float:
    return plan(model, ["--max-model-len", "8192", *args]).memory.weights_gib


@pytest.mark.parametrize("flag", ["--quantization", "-q"])
def test_online_fp8_halves_the_linear_weights_of_a_bf16_checkpoint(flag: str) -> None:
    bf16, fp8 = weights("Qwen3-30B-A3B", []), weights("Qwen3-30B-A3B", [flag, "fp8"])
    # experts and attention at 1 B; embeddings and lm_head (2 x 151936 x 2048) stay 2 B
    assert bf16 == pytest.approx(56.88, abs=0.01)
    assert fp8 == pytest.approx(bf16 / 2 + 2 * 151936 * 2048 / GIB, abs=0.05)
    p = plan("Qwen3-30B-A3B", ["--max-model-len", "8192", flag, "fp8"])
    assert (
        p.memory.capacity.kv_cache_tokens
        > plan("Qwen3-30B-A3B", ["--max-model-len", "8192"]).memory.capacity.kv_cache_tokens
    )
    (f,) = found(p, "quantization-online")
    assert f.severity == "info" and "while loading" in f.message


def test_online_schemes_differ_as_vllm_stores_them() -> None:
    per_tensor = weights("Qwen3-30B-A3B", ["-q", "fp8_per_tensor"])
    assert weights("Qwen3-30B-A3B", ["-q", "fp8"]) == per_tensor
    assert (
        per_tensor < weights("Qwen3-30B-A3B", ["-q", "fp8_per_block"]) < per_tensor * 1.001
    )  # fp32 scale / block
    assert weights("Qwen3-30B-A3B", ["-q", "mxfp8"]) == pytest.approx(per_tensor * 1.03, rel=0.01)
    # int8 weight-only quantizes only the MoE experts: attention stays bf16
    int8 = weights("Qwen3-30B-A3B", ["-q", "int8_per_channel_weight_only"])
    assert per_tensor < int8 < weights("Qwen3-30B-A3B", [])
    # a dense model has no experts: nothing changes
    assert weights("Qwen3-0.6B", ["-q", "int8_per_channel_weight_only"]) == weights("Qwen3-0.6B", [])


def test_online_quantization_ignores_the_checkpoints_bf16_size(tmp_path: Path) -> None:
    """A local folder's safetensors index gives the bf16 bytes; online FP8 must not read them."""
    from llmdeck.catalog.entries import load_catalog

    src = load_catalog().config_for(load_catalog().get("Qwen3-0.6B"))
    (tmp_path / "config.json").write_text(json.dumps(src), encoding="utf-8")
    index = {"metadata": {"total_size": 1_503_238_554}, "weight_map": {"lm_head.weight": "model.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    assert weights(str(tmp_path), []) == pytest.approx(1.4, abs=0.01)
    assert weights(str(tmp_path), ["-q", "fp8"]) < 1.0


def test_a_quantized_checkpoint_keeps_its_scheme_and_a_different_method_is_flagged() -> None:
    model = "Qwen3-Coder-30B-A3B-Instruct-FP8"
    assert weights(model, ["-q", "fp8"]) == weights(model, [])
    assert found(plan(model, ["-q", "fp8"]), "quantization-mismatch") == []
    (f,) = found(plan(model, ["-q", "awq"]), "quantization-mismatch")
    assert f.severity == "warning" and "does not match" in f.message


def test_unknown_and_deprecated_methods_are_errors() -> None:
    (f,) = found(plan("Qwen3-0.6B", ["-q", "fp9"]), "quantization-unknown")
    assert f.severity == "error" and "--quantization fp8" in (f.fix or "")
    (d,) = found(plan("Qwen3-0.6B", ["-q", "fbgemm_fp8"]), "quantization-deprecated")
    assert d.severity == "error"
    allowed = plan("Qwen3-0.6B", ["-q", "fbgemm_fp8", "--allow-deprecated-quantization"])
    assert found(allowed, "quantization-deprecated") == []


def test_online_table_names_only_methods_vllm_has() -> None:
    for method in ("fp8", "fp8_per_tensor", "fp8_per_block", "mxfp8", "int8_per_channel_weight_only"):
        assert method in VLLM_QUANTIZATION_METHODS and online_quantization(method) is not None
    assert online_quantization("awq") is None and online_quantization(None) is None


def test_a_removed_method_is_an_error_on_the_release_without_it() -> None:
    """fp_quant: deprecated through vLLM 0.33 (allowed with the flag), gone in 0.34 (no flag helps)."""
    args = ["-q", "fp_quant", "--allow-deprecated-quantization"]
    assert found(plan("Qwen3-0.6B", args, vllm_version="0.33.0"), "quantization-removed") == []
    (r,) = found(plan("Qwen3-0.6B", args, vllm_version="0.34.0"), "quantization-removed")
    assert r.severity == "error" and "0.34.0" in r.message and "Unknown quantization method" in r.message
    old = plan("Qwen3-0.6B", ["-q", "fp_quant"], vllm_version="0.33.0")
    assert [f.rule for f in old.findings if f.rule.startswith("quantization-")] == ["quantization-deprecated"]
    new = plan("Qwen3-0.6B", ["-q", "fp_quant"], vllm_version="0.34.0")
    assert [f.rule for f in new.findings if f.rule.startswith("quantization-")] == ["quantization-removed"]
    (g,) = found(plan("Qwen3-0.6B", ["-q", "gguf"], vllm_version="0.24.0"), "quantization-removed")
    assert "0.24.0" in g.message
    assert found(plan("Qwen3-0.6B", ["-q", "gguf"], vllm_version="0.23.0"), g.rule) == []


def test_online_schemes_of_vllm_0_34_quantize_their_own_parts() -> None:
    """0.34.0 config/quantization.py shorthands: mxfp4 and fp8_per_channel quantize linear layers and
    experts, nvfp4_per_token and lut_b_moe only the experts, mxfp4_hadamard32 only the linear layers."""
    bf16 = weights("Qwen3-30B-A3B", [])
    w = {
        m: weights("Qwen3-30B-A3B", ["-q", m])
        for m in ("mxfp4", "nvfp4_per_token", "lut_b_moe", "mxfp4_hadamard32")
    }
    assert weights("Qwen3-30B-A3B", ["-q", "fp8_per_channel"]) == weights("Qwen3-30B-A3B", ["-q", "fp8"])
    assert w["mxfp4"] < w["nvfp4_per_token"] < bf16  # attention stays bf16 under nvfp4_per_token
    assert w["lut_b_moe"] < w["nvfp4_per_token"]  # 3.14 bits a weight against 4.5
    assert w["mxfp4"] < w["mxfp4_hadamard32"] < bf16  # the experts (most of a MoE) stay bf16
    dense = weights("Qwen3-0.6B", [])
    assert (
        weights("Qwen3-0.6B", ["-q", "lut_b_moe"]) == dense
        and weights("Qwen3-0.6B", ["-q", "mxfp4_hadamard32"]) < dense
    )
    (f,) = found(
        plan("Qwen3-30B-A3B", ["--max-model-len", "8192", "-q", "mxfp4_hadamard32"]), "quantization-online"
    )
    assert "the linear layers (not the MoE experts)" in f.message


def test_a_modelopt_kv_cache_dtype_as_vllm_reads_it() -> None:
    """vllm get_kv_cache_quant_algo_string (0.22.0 and 0.34.0 alike): kv_cache_scheme before
    kv_cache_quant_algo; FP8 / NVFP4 by name (FP8_E4M3 is not one: vLLM falls back to the model dtype);
    a scheme dict is fp8 only when static 8-bit float."""
    from llmdeck.plan.quant import parse_quantization

    def kv(**quantization: object) -> str | None:
        info = parse_quantization(
            {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", **quantization}}
        )
        return info.kv_cache_dtype if info else None

    assert kv(kv_cache_quant_algo="FP8") == "fp8" and kv(kv_cache_quant_algo="nvfp4") == "nvfp4"
    assert kv(kv_cache_quant_algo="FP8_E4M3") is None and kv() is None
    static = {"num_bits": 8, "type": "float", "dynamic": False}
    assert kv(kv_cache_scheme=static, kv_cache_quant_algo="NVFP4") == "fp8"  # the scheme wins
    assert kv(kv_cache_scheme={**static, "dynamic": True}) is None
    assert kv(kv_cache_scheme={"num_bits": 4, "type": "float"}) == "nvfp4"


def test_a_w4afp8_checkpoint_has_int4_experts_and_block_fp8_elsewhere(tmp_path: Path) -> None:
    """vllm 0.34.0 quantization/w4afp8.py: routed experts INT4 group 128 (bf16 scales as loaded), every
    other linear layer block-128 FP8; it had been priced as bf16."""
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.modelinfo import facts_from_dir
    from llmdeck.plan.params import modules
    from llmdeck.plan.quant import parse_quantization

    def folder(name: str, qc: dict[str, object]) -> str:
        cfg = load_catalog().config_for(load_catalog().get("Qwen3-30B-A3B"))
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(
            json.dumps({**cfg, "quantization_config": qc}), encoding="utf-8"
        )
        return str(tmp_path / name)

    fp8 = weights(folder("fp8", {"quant_method": "fp8", "weight_block_size": [128, 128]}), [])
    w4 = weights(folder("w4", {"quant_method": "w4afp8", "ignored_layers": ["lm_head"]}), [])
    q = parse_quantization({"quant_method": "w4afp8"})
    assert q is not None and q.scheme == "fp8-block" and q.expert_bytes == 0.515625
    assert q.bytes_per_param("model.layers.0.mlp.experts") == 0.515625
    assert q.bytes_per_param("model.layers.0.self_attn.qkv_proj") == 1 + 4 / 128**2
    facts = facts_from_dir(Path(folder("bf16", {})))
    experts = sum(n for name, n, linear in modules(facts) if linear and name.endswith(".mlp.experts"))
    assert fp8 - w4 == pytest.approx(experts * (1 + 4 / 128**2 - 0.515625) / GIB, rel=0.01)
    assert w4 < weights("Qwen3-30B-A3B", []) * 0.3


def test_a_method_newer_than_the_target_is_an_error(tmp_path: Path) -> None:
    """QuantizationMethods of each wheel: w4afp8 first in 0.34.0, nvfp4_per_token in 0.26.0; the flag
    and the checkpoint's own quant_method alike; an unknown target is not guessed at."""
    (tmp_path / "config.json").write_text(
        json.dumps({**_qwen3_30b(), "quantization_config": {"quant_method": "w4afp8"}}), encoding="utf-8"
    )
    (f,) = found(plan(str(tmp_path), [], vllm_version="0.33.0"), "quantization-needs-newer-vllm")
    assert (
        f.severity == "error" and "The checkpoint's quantization (w4afp8) came with vLLM 0.34.0" in f.message
    )
    assert found(plan(str(tmp_path), [], vllm_version="0.34.0"), f.rule) == []
    assert found(plan(str(tmp_path), []), f.rule) == []
    (g,) = found(plan("Qwen3-30B-A3B", ["-q", "nvfp4_per_token"], vllm_version="0.25.0"), f.rule)
    assert "--quantization nvfp4_per_token came with vLLM 0.26.0" in g.message
    assert found(plan("Qwen3-30B-A3B", ["-q", "nvfp4_per_token"], vllm_version="0.26.0"), f.rule) == []


def _qwen3_30b() -> dict[str, object]:
    from llmdeck.catalog.entries import load_catalog

    return dict(load_catalog().config_for(load_catalog().get("Qwen3-30B-A3B")))


def test_a_checkpoints_own_deprecated_or_removed_method_is_named(tmp_path: Path) -> None:
    """vllm 0.22.0 config/model.py:1073-1091: without --quantization the checkpoint's quant_method is
    the method, so the deprecated and removed checks apply to it too."""
    for name, qc in {
        "fbgemm": {"quant_method": "fbgemm_fp8"},
        "bnb": {"quant_method": "bitsandbytes"},
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(
            json.dumps({**_qwen3_30b(), "quantization_config": qc}), encoding="utf-8"
        )
    (d,) = found(plan(str(tmp_path / "fbgemm"), []), "quantization-deprecated")
    assert d.message.startswith("The checkpoint's quantization (fbgemm_fp8) is deprecated")
    assert found(plan(str(tmp_path / "fbgemm"), ["--allow-deprecated-quantization"]), d.rule) == []
    (r,) = found(plan(str(tmp_path / "bnb"), [], vllm_version="0.28.0"), "quantization-removed")
    assert r.message.startswith("The checkpoint's quantization (bitsandbytes) is gone from vLLM 0.28.0")
    assert found(plan(str(tmp_path / "bnb"), [], vllm_version="0.27.0"), r.rule) == []
