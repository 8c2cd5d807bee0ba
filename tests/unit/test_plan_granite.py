"""Granite 4.0-H (GraniteMoeHybrid) in the plan: every layer a Mamba-2 mixer or attention, then a MoE and
a shared MLP (vllm 0.22.0 models/granitemoehybrid.py). Before, the plan read none of its Mamba sizes
(``mamba_n_heads``, ``mamba_d_head``, ``mamba_d_state``) and priced its 36 Mamba layers at no state.

The config is evidence/plan/families/configs/granite-4.0-h-tiny (provenance in the families README).
"""

from __future__ import annotations

import pytest

from cli_helpers import run_cli
from llmdeck.plan.kvlayout import kv_layout
from llmdeck.plan.lint_base import Finding
from llmdeck.plan.modelinfo import facts_from_dir
from llmdeck.plan.params import language_model_params
from llmdeck.plan.planner import PlanRequest, make_plan
from llmdeck.plan.settings import ServeSettings
from repo_paths import ROOT

TINY = ROOT / "evidence" / "plan" / "families" / "configs" / "granite-4.0-h-tiny"


def test_granite_tiny_layers_and_mamba_sizes_are_read() -> None:
    f = facts_from_dir(TINY)
    assert f.is_hybrid and f.is_moe
    assert [i for i, t in enumerate(f.types) if t == "full_attention"] == [5, 15, 25, 35]
    assert (f.mamba_num_heads, f.mamba_head_dim, f.ssm_state_size, f.mamba_n_groups) == (48, 64, 128, 1)
    assert f.mamba_intermediate_size == 2 * 1536 and f.mamba_chunk_size == 256
    assert f.head_dim == 1536 // 12


def test_granite_tiny_state_and_blocks_as_vllm_shapes_them() -> None:
    """mamba_utils.py mamba2_state_shape: conv (inner + 2 x groups x state) x (kernel - 1), SSM heads x
    head dim x state, both in bf16 (Granite has no float32 SSM default); the attention page of 4 KV heads
    x 128 x 2 (K, V) x 2 B = 2 KiB a token must hold one state: 400 tokens, 512 in 'all' mode (chunk 256)."""
    f = facts_from_dir(TINY)
    conv = (3072 + 2 * 1 * 128) * (4 - 1) * 2
    ssm = 48 * 64 * 128 * 2
    none = kv_layout(
        f, ServeSettings(max_model_len=32768, vllm_version="0.22.0", enable_prefix_caching=False)
    )
    assert none.mamba_state_bytes_per_layer == conv + ssm == 806_400
    assert none.attn_bytes_per_token_per_layer == 2 * 4 * 128 * 2
    assert none.block_size == 400 and none.mamba_cache_mode == "none"
    every = kv_layout(f, ServeSettings(max_model_len=32768, vllm_version="0.22.0", mamba_prefix_mode="all"))
    assert every.block_size == 512 and every.blocks_per_request(32768) == 64 * len(every.groups)


def test_granite_tiny_parameters_are_its_published_7b() -> None:
    """IBM publishes granite-4.0-h-tiny as 7B parameters (64 experts, 6 active, a shared MLP)."""
    assert language_model_params(facts_from_dir(TINY)) == pytest.approx(7.0e9, rel=0.01)


def _findings(version: str, image: str | None = None) -> list[Finding]:
    req = PlanRequest(
        model=str(TINY), machine="h200", vllm_version=version, context=32768,
        engine="docker" if image else "venv", image=image,
    )  # fmt: skip
    return make_plan(req, raise_if_impossible=False).findings


def found(plan_findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in plan_findings if f.rule == rule]


def test_vllm_before_026_cannot_build_granite_under_new_transformers() -> None:
    """Rows 14-15 of round 2: vLLM 0.22.0 stopped at start with KeyError: 'linear_attention'."""
    (err,) = found(_findings("0.22.0"), "granite-hybrid-layer-names")
    assert err.severity == "error" and "KeyError: 'linear_attention'" in err.message
    assert "0.26.0" in (err.fix or "") and "transformers<5.13" in (err.fix or "")
    (later,) = found(_findings("0.25.1"), "granite-hybrid-layer-names")
    assert "transformers>=5.5.3,<5.13" in (later.fix or "")
    assert not found(_findings("0.26.0"), "granite-hybrid-layer-names")
    (img,) = found(_findings("0.22.0", image="vllm/vllm-openai:v0.22.0"), "granite-hybrid-layer-names")
    assert img.severity == "warning" and "older than 5.13" in img.message


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ('{"mamba_chunk_size": -1}', "zero or more"),
        ('{"mamba_n_groups": -4}', "zero or more"),
        ('{"mamba_d_state": 1e30}', "no real model"),
        ('{"mamba_d_head": 64.5}', "not a whole number"),
    ],
)
def test_a_broken_mamba_size_is_one_sentence_and_exit_2(
    override: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["plan", str(TINY), "--machine", "h200", "--", "--hf-overrides", override], capsys
    )
    assert code == 2 and not out and says in err and "Traceback" not in err
