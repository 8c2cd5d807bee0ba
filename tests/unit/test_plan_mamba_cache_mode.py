"""Prefix caching on Mamba-2 hybrids: the cache mode vLLM picks and what it costs.

vLLM 0.22.0 keeps a Nemotron-H's Mamba state at every block of a request under prefix caching ('all'
mode, models/config.py:337-377): its block is a multiple of the Mamba chunk and each Mamba group needs
as many blocks as the attention group. On the H200 (evidence/plan/families/results-round2, runs 9, 12,
13) that cut NVIDIA-Nemotron-3-Nano-30B-A3B from 273x to 65.85x; the plan had assumed 'align' (227.88x).
"""

from __future__ import annotations

import re

import pytest

from cli_helpers import run_cli
from llmdeck.plan.kvlayout import kv_layout
from llmdeck.plan.lint_base import Finding
from llmdeck.plan.modelinfo import facts_from_dir
from llmdeck.plan.planner import Plan, PlanRequest, make_plan
from llmdeck.plan.settings import ServeSettings, mamba_prefix_mode
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"
NANO3 = str(FAMILIES / "nemotron-3-nano-30b-a3b")


def found(p: Plan, rule: str) -> list[Finding]:
    return [f for f in p.findings if f.rule == rule]


def _plan(*args: str, version: str = "0.22.0", model: str = NANO3) -> Plan:
    req = PlanRequest(
        model=model, machine="h200", vllm_version=version, context=32768,
        vllm_args=["--gpu-memory-utilization", "0.9", "--enforce-eager", "--max-num-seqs", "8", *args],
    )  # fmt: skip
    return make_plan(req, raise_if_impossible=False)


@pytest.mark.parametrize(
    ("arch", "asked", "version", "mode"),
    [
        ("NemotronHForCausalLM", None, "0.22.0", "all"),
        ("NemotronHForCausalLM", "align", "0.22.0", "align"),
        ("NemotronHForCausalLM", "none", "0.22.0", "all"),  # prefix caching on: vLLM picks its default
        ("Qwen3NextForCausalLM", None, "0.22.0", "align"),
        ("Qwen3NextForCausalLM", "all", "0.22.0", "align"),  # no 'all' support: vLLM falls back
        ("NemotronHForCausalLM", None, "0.27.1", "all"),
        ("NemotronHForCausalLM", None, "0.28.0", "align"),  # vllm PR #50991: 'align' by default
        ("NemotronHForCausalLM", "all", "0.31.0", "all"),  # still there by name (deprecated in 0.30)
        ("NemotronHForCausalLM", "all", "0.32.0", "align"),  # PR #58997: 'all' is gone (the lint says so)
        ("NemotronHForCausalLM", None, "0.32.0", "align"),
        ("NemotronHForCausalLM", None, None, "align"),  # unknown target: the newest checked
    ],
)
def test_the_mode_vllm_takes_under_prefix_caching(
    arch: str, asked: str | None, version: str, mode: str
) -> None:
    assert mamba_prefix_mode(arch, asked, version) == mode


@pytest.mark.parametrize(
    ("name", "block", "chunk"),
    [("nemotron-3-nano-30b-a3b", 2176, 128), ("nemotron-nano-9b-v2", 1536, 256)],  # runs 9 and 12
)
def test_all_mode_block_is_a_multiple_of_the_mamba_chunk(name: str, block: int, chunk: int) -> None:
    f = facts_from_dir(FAMILIES / name)
    assert f.mamba_chunk_size == chunk
    lay = kv_layout(f, ServeSettings(max_model_len=32768, vllm_version="0.22.0", mamba_prefix_mode="all"))
    assert lay.block_size == block and lay.block_size % chunk == 0
    per_block = -(-32768 // block)
    groups = len(lay.groups)
    assert lay.blocks_per_request(32768) == per_block * groups  # every group a block per context block


def test_nemotron_3_prefix_caching_plans_vllm_s_figures_and_warns() -> None:
    plan = _plan("--enable-prefix-caching")
    assert plan.memory.layout.block_size == 2176 and plan.memory.capacity.blocks_per_request == 80
    (warn,) = found(plan, "hybrid-prefix-caching-all-mode")
    assert "--mamba-cache-mode align" in (warn.fix or "")
    every, align = (float(x) for x in re.findall(r"(\d+\.\d) (?:requests|\(it)", warn.message))
    assert abs(every / 65.85 - 1) < 0.01 and abs(align / 227.88 - 1) < 0.01  # vLLM's, runs 9 and 13
    asked = _plan("--enable-prefix-caching", "--mamba-cache-mode", "align")
    assert asked.memory.layout.block_size == 2096
    assert not found(asked, "hybrid-prefix-caching-all-mode") and not found(
        _plan(), "hybrid-prefix-caching-all-mode"
    )


def test_mamba_cache_mode_all_on_a_vllm_without_it_is_an_error() -> None:
    plan = _plan("--enable-prefix-caching", "--mamba-cache-mode", "all", version="0.33.0")
    assert [f.severity for f in found(plan, "mamba-cache-mode-all-removed")] == ["error"]
    old = _plan("--enable-prefix-caching", "--mamba-cache-mode", "all")
    assert not found(old, "mamba-cache-mode-all-removed")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--mamba-cache-mode", "every"], "align"),
        (["--mamba-block-size", "0"], "--mamba-block-size 256"),
        (["--mamba-block-size=-8"], "at least 1"),
    ],
)
def test_a_mamba_flag_vllm_refuses_is_bad_usage(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["plan", NANO3, "--machine", "h200", "--", *flags], capsys)
    assert code == 2 and not out
    assert flags[0].split("=")[0] in err and says in err and "Traceback" not in err


def test_the_align_fix_on_a_gb10_carries_a_chunk_that_holds_a_block() -> None:
    """GB10's default chunk (2048 tokens) is below align mode's block (2096): following the advice alone
    would trip vLLM's align-mode assert, so the advice names a chunk of whole blocks."""
    req = PlanRequest(model=NANO3, machine="dgx-spark", vllm_version="0.22.0", context=32768,
                      vllm_args=["--enable-prefix-caching"])  # fmt: skip
    (warn,) = found(make_plan(req, raise_if_impossible=False), "hybrid-prefix-caching-all-mode")
    assert "--mamba-cache-mode align --max-num-batched-tokens 4192" in (warn.fix or "")
    more = ["--mamba-cache-mode", "align", "--max-num-batched-tokens", "4192"]
    advised = req.model_copy(update={"vllm_args": [*req.vllm_args, *more]})
    assert not make_plan(advised, raise_if_impossible=False).errors
