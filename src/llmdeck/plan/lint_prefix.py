"""Lint rules on ``--prefix-match-unit`` (vLLM 0.26+): the token grid a prefix-cache hit can land on."""

from __future__ import annotations

from llmdeck.plan.kvspec import gdn_flashinfer
from llmdeck.plan.lint_base import Finding, LintContext, Rule, finding, rule
from llmdeck.plan.versions import VersionRange, at_least

SINCE = "0.33.0"  # mid-block hits (partial_hash_hits_enabled) and FlashInfer GDN's prefill checkpoint
FLAG_SINCE = (
    "0.26.0"  # --prefix-match-unit and the multi-group divisibility check (0.26.0 kv_cache_utils.py:678-688)
)
GDN_CHECKPOINT_GRID = 64  # 0.33.0 v1/attention/backends/gdn_attn.py:34 FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
RESOLVE = (
    "vllm 0.33.0 v1/core/kv_cache_utils.py:816-917 (resolve_kv_cache_block_sizes: one KV cache group "
    "takes only its block size; with several, every prefix-cacheable group's block must be a multiple)"
)
MEASURED_NOT = (
    "read in 0.33.0's source, not measured by llmdeck: 0.33 needs torch 2.14, which the H200 lab lacks "
    "(evidence/plan/vllm-0.34/README.md)"
)


def _unit(ctx: LintContext) -> int | None:
    return ctx.flags.get_int("prefix-match-unit")


@rule(
    "prefix-match-unit-invalid",
    "error",
    "--prefix-match-unit does not divide the KV cache blocks",
    [
        RESOLVE,
        "vllm 0.26.0 config/cache.py:56-67 and v1/core/kv_cache_utils.py:678-688 (several groups: each "
        "block a multiple); one group refused from 0.33.0 (before: ignored)",
    ],
    VersionRange(since=FLAG_SINCE),
)
def _r_invalid(ctx: LintContext, meta: Rule) -> list[Finding]:
    unit, s, lay = _unit(ctx), ctx.settings, ctx.memory.layout
    if unit is None or unit <= 0 or not s.enable_prefix_caching:
        return []
    blocks = sorted({g.block_size for g in lay.groups} or {lay.block_size})
    if not lay.hybrid and unit != lay.block_size and at_least(ctx.target_vllm, SINCE):
        why = f"with one KV cache group a hit lands only on the block size ({lay.block_size})"
        fix = f"--prefix-match-unit {lay.block_size}, or leave it out"
    elif lay.hybrid and any(b % unit for b in blocks):
        why = f"the KV cache blocks ({', '.join(map(str, blocks))} tokens) are not multiples of it"
        fix = f"a divisor of {blocks[0]} (e.g. {_divisor(blocks)}), or leave it out"
    else:
        return []
    return [
        finding(
            meta,
            f"--prefix-match-unit {unit}: {why}; vLLM stops at start-up (`Invalid prefix_match_unit`).",
            fix,
        )
    ]


def _divisor(blocks: list[int]) -> int:
    """The largest power of two up to 64 that divides every block."""
    unit = GDN_CHECKPOINT_GRID
    while unit > 1 and any(b % unit for b in blocks):
        unit //= 2
    return unit


@rule(
    "hybrid-prefix-match-unit",
    "info",
    "hybrid + prefix caching on vLLM 0.33+: --prefix-match-unit lets a hit land inside a block",
    [
        RESOLVE,
        "vllm 0.33.0 v1/kv_cache_interface.py:1169-1210 (a prefill's checkpoint at the last multiple of "
        "the match unit), model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:689-750 (FlashInfer "
        "GDN exports it in align mode), v1/core/kv_cache_utils.py:762-793 (partial_hash_hits_enabled)",
        MEASURED_NOT,
    ],
    VersionRange(since=SINCE),
)
def _r_hybrid_unit(ctx: LintContext, meta: Rule) -> list[Finding]:
    s, lay = ctx.settings, ctx.memory.layout
    if _unit(ctx) is not None or not (ctx.facts.is_hybrid and s.enable_prefix_caching):
        return []
    if s.mamba_cache_mode != "align" or lay.block_size <= GDN_CHECKPOINT_GRID:
        return []
    if not gdn_flashinfer(ctx.facts, s.gdn_prefill_backend, s.compute_capability_major):
        return []
    return [
        finding(
            meta,
            f"Without --prefix-match-unit a prefix-cache hit lands on a whole {lay.block_size}-token block, "
            f"so each turn of an agent session recomputes up to {lay.block_size - 1} tokens of what it "
            f"repeats. From vLLM {SINCE} FlashInfer's GDN prefill keeps one mid-block checkpoint a "
            f"request (the plan counts its block): with --prefix-match-unit {GDN_CHECKPOINT_GRID} a hit "
            f"lands on a {GDN_CHECKPOINT_GRID}-token grid. Read in vLLM's source, not yet measured.",
            f"--prefix-match-unit {GDN_CHECKPOINT_GRID} (vLLM {SINCE} or newer)",
        )
    ]
