"""Lint rules for hybrid (Mamba / Gated-DeltaNet) models: block size, chunking, prefix caching."""

from __future__ import annotations

from llmdeck.plan.kvspec import cdiv
from llmdeck.plan.lint_base import FACTS, FIX_LOG_2048, Finding, LintContext, Rule, finding, rule
from llmdeck.plan.versions import VersionRange


@rule(
    "hybrid-block-size-exceeds-batched-tokens",
    "error",
    "hybrid + prefix caching: block_size must be <= max_num_batched_tokens",
    [
        "vllm PR #34445",
        "vllm 0.22.0 vllm/config/vllm.py:2100-2106 (the assert; still in the 0.26.0 wheel, config/vllm.py:"
        "2264-2271); gone from 0.27.0 on (0.27.0 config/vllm.py:2303-2309, 0.33.0 :3413-3419)",
        FIX_LOG_2048,
        f"{FACTS} (seed claims: max_num_batched_tokens vs block_size)",
    ],
    VersionRange(until="0.27.0"),
)
def _r_block_vs_mnbt(ctx: LintContext, meta: Rule) -> list[Finding]:
    s, lay = ctx.settings, ctx.memory.layout
    if not (ctx.facts.is_hybrid and s.mamba_cache_mode == "align"):
        return []
    if lay.block_size <= s.max_num_batched_tokens:
        return []
    given = ctx.flags.has("max-num-batched-tokens")
    good = lay.block_size * max(1, cdiv(4096, lay.block_size))
    return [
        finding(
            meta,
            f"In Mamba cache align mode, block_size ({lay.block_size}) must be <= max_num_batched_tokens "
            f"({s.max_num_batched_tokens}). vLLM raises this AssertionError during engine start-up, after "
            "loading the weights"
            + ("" if given else f" (max_num_batched_tokens {s.max_num_batched_tokens} is the default here)")
            + ".",
            f"--max-num-batched-tokens {good} (a multiple of the block size {lay.block_size}), or drop "
            "--enable-prefix-caching.",
        )
    ]


@rule(
    "hybrid-batched-tokens-not-block-multiple",
    "warning",
    "hybrid + prefix caching: max_num_batched_tokens should be a multiple of block_size",
    [
        f"{FACTS} (Hybrid: the scheduler rounds prefill chunks down to a multiple of the block size)",
        "vllm 0.22.0 v1/core/sched/scheduler.py:300-316 (rounds down; 0.26.0 the same); from 0.27.0 "
        "_mamba_block_aligned_split lets chunks keep private state up to the next block boundary",
    ],
    VersionRange(until="0.27.0"),
)
def _r_mnbt_multiple(ctx: LintContext, meta: Rule) -> list[Finding]:
    s, lay = ctx.settings, ctx.memory.layout
    if not (ctx.facts.is_hybrid and s.mamba_cache_mode == "align"):
        return []
    if lay.block_size > s.max_num_batched_tokens or s.max_num_batched_tokens % lay.block_size == 0:
        return []
    used = (s.max_num_batched_tokens // lay.block_size) * lay.block_size
    better = used + lay.block_size
    return [
        finding(
            meta,
            f"max_num_batched_tokens {s.max_num_batched_tokens} is not a multiple of the block size "
            f"{lay.block_size}: prefill chunks are rounded down, so only {used} tokens are "
            "scheduled per step.",
            f"--max-num-batched-tokens {better} (or {used}).",
        )
    ]


@rule(
    "chunked-prefill-flag-is-a-no-op",
    "info",
    "--enable-chunked-prefill does nothing in the V1 engine",
    [f"{FACTS} (seed claims: --enable-chunked-prefill makes SSM models 9x slower — FALSE in V1)"],
)
def _r_chunked_noop(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.flags.get_bool("enable-chunked-prefill") is not True:
        return []
    return [
        finding(
            meta,
            "--enable-chunked-prefill is a no-op: vLLM V1 always chunks prefill for generative models "
            "(seed 000's 9x slowdown is not caused by this flag).",
            "Remove --enable-chunked-prefill.",
        )
    ]


@rule(
    "chunked-prefill-disabled-on-hybrid",
    "error",
    "disabling chunked prefill on a hybrid model with prefix caching fails",
    [
        f"{FACTS} (seed claims: Chunked prefill is required for mamba cache mode 'align')",
        "vllm 0.22.0 model_executor/models/config.py:372-374; 0.33.0 the same file:772-773",
    ],
)
def _r_chunked_disabled(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.flags.get_bool("enable-chunked-prefill") is not False:
        return []
    if not (ctx.facts.is_hybrid and ctx.settings.mamba_cache_mode == "align"):
        return []
    return [
        finding(
            meta,
            "Chunked prefill is required for mamba cache mode 'align': with prefix caching on this hybrid "
            "model, --no-enable-chunked-prefill makes vLLM fail at start-up.",
            "Remove --no-enable-chunked-prefill.",
        )
    ]


# Hybrids whose Mamba-2 / SSM layers plan does not model yet: it would count every layer as attention.
UNMODELLED_SSM_ARCHITECTURES = frozenset(
    {
        "NemotronHForCausalLM",
        "Mamba2ForCausalLM",
        "MambaForCausalLM",
        "FalconH1ForCausalLM",
        "BambaForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "JambaForCausalLM",
        "Zamba2ForCausalLM",
    }
)


@rule(
    "ssm-hybrid-not-modelled",
    "warning",
    "plan does not model this model's Mamba-2 / SSM layers",
    [
        "vllm 0.22.0 model_executor/models/nemotron_h.py (hybrid_override_pattern: M = Mamba-2 mixer with a "
        "constant state, * = attention with KV, - = MLP): only the * layers hold KV, the M layers one state",
        "issue 38 (Nemotron-H: every one of its 56 layers counted as attention)",
    ],
)
def _r_ssm_not_modelled(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.facts.architecture not in UNMODELLED_SSM_ARCHITECTURES or ctx.facts.linear_attention_layers:
        return []  # Nemotron-H's M/*/- patterns are modelled (plan/params.py, kvspec.mamba_state_bytes)
    return [
        finding(
            meta,
            f"{ctx.facts.architecture} mixes Mamba-2 (SSM) layers with attention, and llmdeck's plan "
            f"does not model those layers yet: it counts all {ctx.facts.num_hidden_layers} layers as "
            "attention, so its KV-cache tokens, concurrency and weights for this model are wrong.",
            "Read vLLM's own start-up lines (`Available KV cache memory`, `GPU KV cache size`) for this "
            "model; pass --kv-cache-memory-gib only as a budget, not as a prediction.",
        )
    ]
