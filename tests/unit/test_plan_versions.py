"""Version-bound rules (vLLM 0.22 / 0.33 / unknown), RoPE-derived max_model_len, family parsers."""

from __future__ import annotations

import pytest

from llmdeck.catalog.entries import load_catalog
from llmdeck.plan.lint import RULES
from llmdeck.plan.machine import h200
from llmdeck.plan.planner import Plan, PlanRequest, make_plan
from llmdeck.plan.versions import VersionRange, effective_version, is_known, version_tuple
from repo_paths import ROOT

CATALOG = load_catalog()
FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"
HYBRID_2048 = [
    "--max-model-len", "131072", "--kv-cache-dtype", "fp8", "--enable-prefix-caching",
    "--max-num-seqs", "8", "--max-num-batched-tokens", "2048", "--language-model-only",
]  # fmt: skip


def plan(model: str, args: list[str], **kw: object) -> Plan:
    req = PlanRequest(model=model, machine="h200", vllm_args=args, **kw)  # type: ignore[arg-type]
    return make_plan(req, catalog=CATALOG, machine=h200(), raise_if_impossible=False)


def rules(p: Plan) -> dict[str, str]:
    return {f.rule: f.severity for f in p.findings}


def test_version_parsing_and_ranges() -> None:
    assert version_tuple("v0.22.1rc1") == (0, 22, 1) and version_tuple("latest") == ()
    assert not is_known("nightly") and is_known("0.33.0") and effective_version("latest") == "0.33.0"
    r = VersionRange(until="0.33.0")
    assert r.contains("0.22.0") and not r.contains("0.33.0") and r.describe() == "vLLM < 0.33.0"


def test_every_version_bound_rule_names_its_range() -> None:
    bound = {k for k, r in RULES.items() if not r.versions.is_all}
    assert {"hybrid-block-size-exceeds-batched-tokens", "mamba-cache-mode-all-removed"} <= bound
    # the scheduler still rounds a chunk down to whole blocks in every release checked (0.22-0.34)
    assert "hybrid-batched-tokens-not-block-multiple" not in bound


@pytest.mark.parametrize(("version", "fires"), [("0.26.0", True), ("0.27.0", False), ("0.32.0", False)])
def test_block_assertion_bisected_on_pypi_wheels(version: str, fires: bool) -> None:
    # the assert is in the 0.26.0 wheel's config/vllm.py and gone from 0.27.0's
    p = plan("Qwen3.6-35B-A3B-FP8", HYBRID_2048, engine="venv", vllm_version=version)
    assert ("hybrid-block-size-exceeds-batched-tokens" in rules(p)) is fires
    assert p.memory.layout.block_size == 2096  # the 64-rounding is new in 0.33 (not in 0.32)


def test_block_assertion_error_on_022_gone_on_033() -> None:
    old = plan("Qwen3.6-35B-A3B-FP8", HYBRID_2048, engine="venv", vllm_version="0.22.0")
    assert rules(old)["hybrid-block-size-exceeds-batched-tokens"] == "error"
    assert old.memory.layout.block_size == 2096
    new = plan("Qwen3.6-35B-A3B-FP8", HYBRID_2048, engine="venv", vllm_version="0.33.0")
    assert "hybrid-block-size-exceeds-batched-tokens" not in rules(new)
    # 0.33 rounds the GDN block to 64 with FlashInfer prefill (Hopper's default): 2112, not 2096
    assert new.memory.layout.block_size == 2112
    triton = plan(
        "Qwen3.6-35B-A3B-FP8", [*HYBRID_2048, "--gdn-prefill-backend", "triton"], vllm_version="0.33.0"
    )
    assert triton.memory.layout.block_size == 2096


@pytest.mark.parametrize("image", [None, "vllm/vllm-openai:latest", "vllm/vllm-openai:nightly"])
def test_unknown_version_turns_the_error_into_a_warning_naming_the_versions(image: str | None) -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", HYBRID_2048, engine="docker", image=image)
    (f,) = [f for f in p.findings if f.rule == "hybrid-block-size-exceeds-batched-tokens"]
    assert f.severity == "warning" and "vLLM < 0.27.0" in f.message and f.versions == "vLLM < 0.27.0"
    assert "unknown" in f.message
    assert not p.errors


def test_tagged_image_pins_the_version() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", HYBRID_2048, engine="docker", image="vllm/vllm-openai:v0.22.0")
    assert rules(p)["hybrid-block-size-exceeds-batched-tokens"] == "error"


def test_qwen3_8b_yarn4_at_131072_is_not_rejected() -> None:
    p = plan(str(FAMILIES / "qwen3-8b-yarn4"), ["--max-model-len", "131072"], engine="venv")
    assert "max-model-len-beyond-position-embeddings" not in rules(p)
    assert p.settings.max_model_len == 131072


def test_qwen3_8b_yarn4_via_hf_overrides_and_without_it() -> None:
    plain = plan(str(FAMILIES / "qwen3-8b-yarn4"), [], engine="venv")
    assert plain.settings.max_model_len == 131072  # vLLM's default: the derived length
    over = plan(
        str(FAMILIES / "qwen3-8b-yarn4"),
        ["--max-model-len", "131072", "--hf-overrides", '{"rope_scaling": null}'],
        engine="venv",
    )
    (f,) = [f for f in over.findings if f.rule == "max-model-len-beyond-position-embeddings"]
    assert f.fix is not None and f.fix.startswith("--max-model-len 40960") and "yarn" in f.fix


def test_gpt_oss_parsers_and_vllm_default_reasoning() -> None:
    p = plan("gpt-oss-120b", [], engine="venv", vllm_version="0.22.0")
    r = rules(p)
    assert r.get("tool-call-parser-missing") == "warning"
    assert "reasoning-parser-mismatch" not in r and "thinking-default-missing" not in r
    (fix,) = [f.fix for f in p.findings if f.rule == "tool-call-parser-missing"]
    assert fix is not None and "--tool-call-parser openai" in fix
    wrong = plan("gpt-oss-120b", ["--reasoning-parser", "qwen3"], engine="venv")
    assert rules(wrong)["reasoning-parser-mismatch"] == "error"


def test_glm47_flash_parsers() -> None:
    p = plan("GLM-4.7-Flash", ["--enable-auto-tool-choice", "--tool-call-parser", "glm45"], engine="venv")
    (f,) = [f for f in p.findings if f.rule == "tool-call-parser-wrong"]
    assert f.fix == "--tool-call-parser glm47"
    assert p.facts.use_mla and p.facts.architecture == "Glm4MoeLiteForCausalLM"


def test_vllm_0_34_blocks_are_64_tokens_and_its_kv_sizing_is_named() -> None:
    """0.34 raised CacheConfig.DEFAULT_BLOCK_SIZE from 16 to 64 (every backend modelled takes it): a
    dense block is 64, a hybrid's rounds to 64 (Qwen3.6 without prefix caching 1056 -> 1088)."""
    dense = {v: plan("Qwen3-0.6B", [], vllm_version=v).memory.layout.block_size for v in ("0.33.0", "0.34.0")}
    assert dense == {"0.33.0": 16, "0.34.0": 64}
    off = ["--no-enable-prefix-caching", "--max-model-len", "32768"]
    hybrid = {
        v: plan("Qwen3.6-35B-A3B-FP8", off, vllm_version=v).memory.layout.block_size
        for v in ("0.33.0", "0.34.0")
    }
    assert hybrid == {"0.33.0": 1056, "0.34.0": 1088}
    assert "kv-cache-sized-after-warmup" not in rules(plan("Qwen3-0.6B", [], vllm_version="0.33.0"))
    assert rules(plan("Qwen3-0.6B", [], vllm_version="0.34.0"))["kv-cache-sized-after-warmup"] == "info"
    by_bytes = plan("Qwen3-0.6B", ["--kv-cache-memory-bytes", str(4 << 30)], vllm_version="0.34.0")
    assert "kv-cache-sized-after-warmup" not in rules(by_bytes)  # bytes turn the extensible cache off
