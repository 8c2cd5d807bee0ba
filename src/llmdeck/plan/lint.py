"""The vLLM flag linter: every rule has an id, a severity, a message, a fix and its evidence.

Evidence is a section of ``shared/knowledge/vllm-facts.md``, a vLLM PR/issue, or a real log in
``shared/fixtures/``. Rules are registered in :data:`RULES` (``llmdeck plan --json`` shows them,
and every rule has a test in ``tests/test_plan_lint.py``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.catalog.models import CatalogEntry
from llmdeck.plan.flags import VllmFlags
from llmdeck.plan.machine import GB10_CEILING, MachineProfile
from llmdeck.plan.memory import MemoryPlan, ServeSettings, cdiv
from llmdeck.plan.modelinfo import ModelFacts

Severity = Literal["error", "warning", "info"]
FACTS = "shared/knowledge/vllm-facts.md"
FIX_LOG_2048 = "shared/fixtures/vllm-0.22.0-h200/hybrid-fails-max-num-batched-tokens-2048.log"
SEED000_LOG = "shared/fixtures/vllm-0.22.0-h200/hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log"


class Finding(BaseModel):
    rule: str
    severity: Severity
    message: str
    fix: str | None = None
    evidence: list[str] = Field(default_factory=list)


class Rule(BaseModel):
    id: str
    severity: Severity
    title: str
    evidence: list[str]


class LintContext(BaseModel):
    """Everything the rules look at."""

    facts: ModelFacts
    entry: CatalogEntry | None = None
    model_name: str
    flags: VllmFlags
    settings: ServeSettings
    machine: MachineProfile
    memory: MemoryPlan
    workload: str = "agent"
    target_vllm: str | None = None
    min_vllm: str | None = None
    min_vllm_evidence: str | None = None
    image: str | None = None
    image_vllm_below: str | None = None
    target_concurrency: int = 1


RULES: dict[str, Rule] = {}
_CHECKS: list[Callable[[LintContext], list[Finding]]] = []


def rule(
    rule_id: str, severity: Severity, title: str, evidence: list[str]
) -> Callable[[Callable[[LintContext, Rule], list[Finding]]], Callable[[LintContext, Rule], list[Finding]]]:
    meta = Rule(id=rule_id, severity=severity, title=title, evidence=evidence)
    RULES[rule_id] = meta

    def deco(
        fn: Callable[[LintContext, Rule], list[Finding]],
    ) -> Callable[[LintContext, Rule], list[Finding]]:
        _CHECKS.append(lambda ctx: fn(ctx, meta))
        return fn

    return deco


def _f(meta: Rule, message: str, fix: str | None, severity: Severity | None = None) -> Finding:
    return Finding(
        rule=meta.id,
        severity=severity or meta.severity,
        message=message,
        fix=fix,
        evidence=list(meta.evidence),
    )


def version_tuple(v: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in v.lstrip("v").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


# ---- family expectations ------------------------------------------------------------------


def _is_coder(ctx: LintContext) -> bool:
    if ctx.entry is not None:
        return ctx.entry.family == "qwen3-coder"
    return "coder" in ctx.model_name.lower()


def expected_tool_parser(ctx: LintContext) -> str | None:
    if ctx.entry is not None:
        return ctx.entry.tool_call_parser
    mt = ctx.facts.model_type
    if mt.startswith(("qwen3_5", "qwen3_next")) or (mt.startswith("qwen3") and _is_coder(ctx)):
        return "qwen3_coder"
    if mt.startswith("qwen3"):
        return "hermes"
    return None


def expected_reasoning_parser(ctx: LintContext) -> str | None:
    if ctx.entry is not None:
        return ctx.entry.reasoning_parser
    mt = ctx.facts.model_type
    if mt.startswith("qwen3") and not _is_coder(ctx) and "instruct-2507" not in ctx.model_name.lower():
        return "qwen3"
    return None


def is_thinking_model(ctx: LintContext) -> bool:
    if ctx.entry is not None:
        return ctx.entry.thinking
    return expected_reasoning_parser(ctx) is not None


# ---- rules ------------------------------------------------------------------------------------


@rule(
    "hybrid-block-size-exceeds-batched-tokens",
    "error",
    "hybrid + prefix caching: block_size must be <= max_num_batched_tokens",
    ["vllm PR #34445", FIX_LOG_2048, f"{FACTS} (seed claims: max_num_batched_tokens vs block_size)"],
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
        _f(
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
    [f"{FACTS} (Hybrid: the scheduler rounds prefill chunks down to a multiple of the block size)"],
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
        _f(
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
        _f(
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
    [f"{FACTS} (seed claims: Chunked prefill is required for mamba cache mode 'align')"],
)
def _r_chunked_disabled(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.flags.get_bool("enable-chunked-prefill") is not False:
        return []
    if not (ctx.facts.is_hybrid and ctx.settings.mamba_cache_mode == "align"):
        return []
    return [
        _f(
            meta,
            "Chunked prefill is required for mamba cache mode 'align': with prefix caching on this hybrid "
            "model, --no-enable-chunked-prefill makes vLLM fail at start-up.",
            "Remove --no-enable-chunked-prefill.",
        )
    ]


@rule(
    "tool-call-parser-wrong",
    "error",
    "the tool-call parser does not match the model family",
    [
        f"{FACTS} (seed claims: --tool-call-parser qwen3_coder required; hermes gives agents no output)",
        "seed 004_e407cff24acc1319.txt §6.4",
    ],
)
def _r_tool_parser_wrong(ctx: LintContext, meta: Rule) -> list[Finding]:
    given = ctx.flags.get("tool-call-parser")
    want = expected_tool_parser(ctx)
    if not isinstance(given, str) or want is None or given == want:
        return []
    return [
        _f(
            meta,
            f"--tool-call-parser {given} does not parse {ctx.model_name}'s tool-call format; agents get "
            "no tool calls (seed 004: with hermes, opencode shows almost no output). This "
            f"family needs {want}.",
            f"--tool-call-parser {want}",
        )
    ]


@rule(
    "tool-call-parser-missing",
    "warning",
    "agent use without a tool-call parser",
    [
        f"{FACTS} (seed claims: tool calls need --enable-auto-tool-choice and the family's parser)",
        "seed 004_e407cff24acc1319.txt §6.4",
    ],
)
def _r_tool_parser_missing(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.workload != "agent" or ctx.flags.has("tool-call-parser"):
        return []
    want = expected_tool_parser(ctx)
    if want is None:
        return []
    return [
        _f(
            meta,
            "Coding agents call tools, but no --tool-call-parser is set: tool calls come back as plain text.",
            f"--enable-auto-tool-choice --tool-call-parser {want}",
        )
    ]


@rule(
    "tools-without-auto-tool-choice",
    "error",
    "a tool-call parser without --enable-auto-tool-choice",
    [
        f"{FACTS} (seed claims: tool calls need --enable-auto-tool-choice)",
        "seed 004_e407cff24acc1319.txt §6.4",
    ],
)
def _r_no_auto(ctx: LintContext, meta: Rule) -> list[Finding]:
    if not ctx.flags.has("tool-call-parser") or ctx.flags.get_bool("enable-auto-tool-choice"):
        return []
    return [
        _f(
            meta,
            "--tool-call-parser is set but --enable-auto-tool-choice is not: requests with tool_choice "
            '"auto" (what agents send) are rejected, so the parser never runs.',
            "--enable-auto-tool-choice",
        )
    ]


@rule(
    "auto-tool-choice-without-parser",
    "error",
    "--enable-auto-tool-choice without --tool-call-parser",
    ["vllm/entrypoints/openai/cli_args.py: --enable-auto-tool-choice requires --tool-call-parser"],
)
def _r_auto_no_parser(ctx: LintContext, meta: Rule) -> list[Finding]:
    if not ctx.flags.get_bool("enable-auto-tool-choice") or ctx.flags.has("tool-call-parser"):
        return []
    want = expected_tool_parser(ctx) or "PARSER"
    return [
        _f(
            meta,
            "--enable-auto-tool-choice needs --tool-call-parser; vLLM refuses to start without it.",
            f"--tool-call-parser {want}",
        )
    ]


@rule(
    "reasoning-parser-mismatch",
    "error",
    "a reasoning parser that does not fit the model (wrong, missing, or on a non-thinking model)",
    [f"{FACTS} (seed claims: Qwen3-Coder* no reasoning parser; Qwen3.5/3.6 and Qwen3 use qwen3)"],
)
def _r_reasoning(ctx: LintContext, meta: Rule) -> list[Finding]:
    given = ctx.flags.get("reasoning-parser")
    want = expected_reasoning_parser(ctx)
    if isinstance(given, str):
        if want is None and (ctx.entry is not None or _is_coder(ctx)):
            return [
                _f(
                    meta,
                    f"{ctx.model_name} does not think (no <think> block), so --reasoning-parser {given} has "
                    "nothing to parse and may move plain answers into `reasoning`.",
                    f"Remove --reasoning-parser {given}.",
                    "warning",
                )
            ]
        if want is not None and given != want:
            return [
                _f(
                    meta,
                    f"--reasoning-parser {given} does not match {ctx.model_name}; this family needs {want}.",
                    f"--reasoning-parser {want}",
                )
            ]
        return []
    if want is not None and is_thinking_model(ctx):
        return [
            _f(
                meta,
                f"{ctx.model_name} thinks by default, and without --reasoning-parser {want} its <think> "
                "text lands in `content`, where agents read it as the answer.",
                f"--reasoning-parser {want}",
                "warning",
            )
        ]
    return []


@rule(
    "max-model-len-beyond-position-embeddings",
    "error",
    "--max-model-len above the model's max_position_embeddings",
    ["vllm/config/model.py: User-specified max_model_len is greater than the derived max_model_len"],
)
def _r_len_positions(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.settings.max_model_len <= ctx.facts.max_position_embeddings:
        return []
    return [
        _f(
            meta,
            f"max_model_len {ctx.settings.max_model_len} is above the model's max_position_embeddings "
            f"{ctx.facts.max_position_embeddings}; vLLM refuses it (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, "
            "which gives garbage past the trained length).",
            f"--max-model-len {ctx.facts.max_position_embeddings}",
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
    return [_f(meta, msg, " or ".join(fixes) or "Use a smaller (quantized) model or a bigger machine.")]


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
        _f(
            meta,
            f"The KV cache holds {mem.capacity.max_concurrency:.2f} requests of {mem.max_model_len} tokens, "
            f"fewer than the {ctx.target_concurrency} asked for; the rest wait or get preempted "
            "at full length.",
            fix,
        )
    ]


@rule(
    "gpu-memory-utilization-above-gb10-ceiling",
    "error",
    "--gpu-memory-utilization beyond what GB10 unified memory can give",
    [
        f"{FACTS} (seed claims: --gpu-memory-utilization 0.85 on GB10; free-memory start-up error)",
        "vllm PR #35356",
        "vllm issue #48140",
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
    if free is not None and requested > free:
        safe = min(int(free / m.total_gib * 100) / 100, GB10_CEILING)
        return [
            _f(
                meta,
                f"--gpu-memory-utilization {util} asks for {requested:.1f} GiB of {m.total_gib} "
                "GiB, more than "
                f"MemAvailable here ({free:.1f} GiB): {fail_msg}",
                f"--gpu-memory-utilization {safe} (and unload other models, drop caches)",
            )
        ]
    if free is None and m.fails_at_utilization is not None and util >= m.fails_at_utilization:
        return [
            _f(
                meta,
                f"--gpu-memory-utilization {util} asks for {requested:.1f} GiB of {m.total_gib} GiB; a GB10 "
                f"boot has less free than that from {m.fails_at_utilization} up: {fail_msg}",
                f"--gpu-memory-utilization {GB10_CEILING}",
            )
        ]
    if util > GB10_CEILING:
        return [
            _f(
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
        _f(
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
            _f(
                meta,
                "--language-model-only only applies to multimodal architectures; "
                f"{ctx.facts.architecture} is "
                "text-only, so the flag does nothing (and older vLLM rejects it).",
                "Remove --language-model-only.",
            )
        ]
    if ctx.facts.has_vision and not lmo:
        return [
            _f(
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
    "thinking-default-missing",
    "warning",
    "agent use of a thinking model without a server-side thinking default",
    [
        "vllm PR #31343",
        f"{FACTS} (seed claims: thinking can only be disabled per request — outdated)",
        "seed 000_eaba2bb2a35c69bf.txt Gotcha 2",
    ],
)
def _r_thinking(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.workload != "agent" or not is_thinking_model(ctx):
        return []
    kwargs = ctx.flags.get_json("default-chat-template-kwargs")
    if isinstance(kwargs, dict) and "enable_thinking" in kwargs:
        return []
    return [
        _f(
            meta,
            f"{ctx.model_name} thinks before every answer; agents that do not send chat_template_kwargs burn "
            "their max_tokens on <think> and get `content: null, finish_reason: length`.",
            "--default-chat-template-kwargs '{\"enable_thinking\": false}' (requests can still turn it on)",
        )
    ]


@rule(
    "chat-template-kwargs-flag-does-not-exist",
    "error",
    "--chat-template-kwargs is not a vLLM flag",
    [f"{FACTS} (seed claims: there is no --chat-template-kwargs flag)", "vllm PR #31343"],
)
def _r_ctk(ctx: LintContext, meta: Rule) -> list[Finding]:
    if not ctx.flags.has("chat-template-kwargs"):
        return []
    value = ctx.flags.get("chat-template-kwargs")
    return [
        _f(
            meta,
            "vllm serve has no --chat-template-kwargs flag; it exits with `unrecognized arguments`.",
            f"--default-chat-template-kwargs {shlex.quote(value) if isinstance(value, str) else '...'}",
        )
    ]


def lint(ctx: LintContext) -> list[Finding]:
    """Run every rule; errors first, then warnings, then infos."""
    findings: list[Finding] = []
    for check in _CHECKS:
        findings.extend(check(ctx))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: order[f.severity])
