"""``--prefix-match-unit`` (vLLM 0.33+): the rules read from 0.33.0's resolve_kv_cache_block_sizes and
FlashInfer GDN's mid-prefill checkpoint."""

from __future__ import annotations

from test_plan_lint import FAMILIES, found, plan

QWEN36 = str(FAMILIES / "qwen3.6-35b-a3b")
BASE = ["--max-model-len", "32768", "--enable-prefix-caching", "--language-model-only"]


def test_a_gdn_hybrid_on_0_33_is_told_of_the_finer_grid() -> None:
    (f,) = found(plan(QWEN36, BASE, vllm_version="0.33.0"), "hybrid-prefix-match-unit")
    assert f.severity == "info" and "1088-token block" in f.message and "64-token grid" in f.message
    assert f.fix == "--prefix-match-unit 64 (vLLM 0.33.0 or newer)"
    assert found(plan(QWEN36, [*BASE, "--prefix-match-unit", "64"], vllm_version="0.33.0"), f.rule) == []
    # Triton's GDN prefill exports no checkpoint; 0.32 has no such flag
    assert (
        found(plan(QWEN36, [*BASE, "--gdn-prefill-backend", "triton"], vllm_version="0.33.0"), f.rule) == []
    )
    assert found(plan(QWEN36, BASE, vllm_version="0.32.0"), f.rule) == []
    off = [*BASE[:2], "--no-enable-prefix-caching"]
    assert found(plan(QWEN36, off, vllm_version="0.33.0"), f.rule) == []


def test_a_unit_that_does_not_divide_the_blocks_is_the_error_vllm_raises() -> None:
    (e,) = found(
        plan(QWEN36, [*BASE, "--prefix-match-unit", "48"], vllm_version="0.33.0"), "prefix-match-unit-invalid"
    )
    assert e.severity == "error" and "(1088 tokens) are not multiples" in e.message
    assert e.fix is not None and "(e.g. 64)" in e.fix
    dense = ["--enable-prefix-caching", "--prefix-match-unit", "32"]
    (d,) = found(plan("Qwen3-0.6B", dense, vllm_version="0.33.0"), e.rule)
    assert "only on the block size (16)" in d.message and d.fix == "--prefix-match-unit 16, or leave it out"
    assert (
        found(
            plan(
                "Qwen3-0.6B", ["--enable-prefix-caching", "--prefix-match-unit", "16"], vllm_version="0.33.0"
            ),
            e.rule,
        )
        == []
    )


def test_with_the_finer_grid_fp8_no_longer_coarsens_the_hits() -> None:
    fp8 = [*BASE, "--kv-cache-dtype", "fp8"]
    assert found(plan(QWEN36, fp8, vllm_version="0.33.0"), "hybrid-fp8-kv-coarsens-prefix-cache")
    unit = [*fp8, "--prefix-match-unit", "64"]
    assert found(plan(QWEN36, unit, vllm_version="0.33.0"), "hybrid-fp8-kv-coarsens-prefix-cache") == []


def test_the_flag_and_its_checks_by_release() -> None:
    """0.26.0 brought the flag and the several-groups check; a single group ignored it until 0.33."""
    (e,) = found(
        plan(QWEN36, [*BASE, "--prefix-match-unit", "64"], vllm_version="0.26.0"), "prefix-match-unit-invalid"
    )
    assert "(1056 tokens) are not multiples" in e.message and e.fix is not None and "(e.g. 32)" in e.fix
    dense = ["--enable-prefix-caching", "--prefix-match-unit", "32"]
    assert found(plan("Qwen3-0.6B", dense, vllm_version="0.32.0"), e.rule) == []
    (old,) = found(plan("Qwen3-0.6B", dense, vllm_version="0.25.0"), "flag-not-in-target-vllm")
    assert old.message.startswith("--prefix-match-unit came with vLLM 0.26.0; vLLM 0.25.0 stops")
