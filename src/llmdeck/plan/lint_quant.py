"""Lint rules on ``--quantization``: a method vLLM does not know, a deprecated one, one that
contradicts the checkpoint, and what an online method does to a full-precision checkpoint."""

from __future__ import annotations

from llmdeck.plan.lint_base import Finding, LintContext, Rule, finding, rule
from llmdeck.plan.quant import (
    ADDED_QUANTIZATION,
    DEPRECATED_QUANTIZATION,
    ONLINE_QUANTIZATION,
    REMOVED_QUANTIZATION,
    VLLM_QUANTIZATION_METHODS,
)
from llmdeck.plan.versions import at_least, is_known

VERIFY = "vllm 0.22.0 vllm/config/model.py:1002-1100 (ModelConfig._verify_quantization); the same in 0.32.0"
# Methods that stand for another one's kernels (vLLM's override list): same family, no mismatch.
_FAMILY = {
    "awq_marlin": "awq",
    "auto_awq": "awq",
    "cpu_awq": "awq",
    "gptq_marlin": "gptq",
    "auto_gptq": "gptq",
    "gpt_oss_mxfp4": "mxfp4",
    "modelopt_fp4": "modelopt",
    "modelopt_mxfp8": "modelopt",
    "modelopt_mixed": "modelopt",
    "fbgemm_fp8": "fp8",
}
# Methods vLLM lets take over other checkpoints' formats (humming always wins; moe_wna16 and inc
# take GPTQ/AWQ/auto-round ones): no mismatch is claimed for them.
_TAKES_OVER = frozenset({"humming", "moe_wna16", "inc"})


def _flag(ctx: LintContext) -> str | None:
    value = ctx.flags.get("quantization")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _in_effect(ctx: LintContext) -> tuple[str, str] | None:
    """The method vLLM will load with and how to name it: the flag, else the checkpoint's own."""
    if (method := _flag(ctx)) is not None:
        return method, f"--quantization {method}"
    q = ctx.facts.quantization
    if q is None or q.online:
        return None
    return q.method.lower(), f"the checkpoint's quantization ({q.method})"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


@rule(
    "quantization-unknown",
    "error",
    "--quantization names a method vLLM does not have",
    [
        VERIFY + ": Unknown quantization method",
        "vllm 0.22.0 model_executor/layers/quantization/__init__.py:12-47",
    ],
)
def _r_unknown(ctx: LintContext, meta: Rule) -> list[Finding]:
    method = _flag(ctx)
    if method is None or method in VLLM_QUANTIZATION_METHODS or method in DEPRECATED_QUANTIZATION:
        return []
    fix = "leave --quantization out (vLLM reads the checkpoint's)"
    if ctx.facts.quantization is None:
        fix = "--quantization fp8 (FP8 weights, quantized while loading), or " + fix
    return [
        finding(
            meta,
            f"--quantization {method!r} is not a method vLLM knows; it stops at start-up (`Unknown "
            "quantization method`) unless a plugin registers it.",
            fix,
        )
    ]


@rule(
    "quantization-deprecated",
    "error",
    "a deprecated --quantization method without --allow-deprecated-quantization",
    [VERIFY + ": The quantization method %s is deprecated ... To bypass, set allow_deprecated_quantization"],
)
def _r_deprecated(ctx: LintContext, meta: Rule) -> list[Finding]:
    method, named = _in_effect(ctx) or (None, "")
    if method not in DEPRECATED_QUANTIZATION or ctx.flags.get_bool("allow-deprecated-quantization"):
        return []
    if method in REMOVED_QUANTIZATION and _removed_for(ctx, method):
        return []  # quantization-removed says it
    return [
        finding(
            meta,
            f"{_cap(named)} is deprecated; vLLM stops at start-up unless it is allowed.",
            "--allow-deprecated-quantization, or another method (fp8 for FP8 weights)",
        )
    ]


def _removed_for(ctx: LintContext, method: str) -> bool:
    """The target is a release without the method (an unknown target: the newest release checked)."""
    return at_least(ctx.target_vllm, REMOVED_QUANTIZATION[method])


@rule(
    "quantization-removed",
    "error",
    "--quantization names a method the target vLLM no longer has",
    [
        "vllm model_executor/layers/quantization/__init__.py QuantizationMethods, each wheel 0.22.0-0.34.0:"
        " cpu_awq gone in 0.23.0, gguf in 0.24.0, bitsandbytes in 0.28.0, fp_quant (deprecated) in 0.34.0",
        VERIFY + ": Unknown quantization method",
    ],
)
def _r_removed(ctx: LintContext, meta: Rule) -> list[Finding]:
    method, named = _in_effect(ctx) or (None, "")
    if method not in REMOVED_QUANTIZATION or not _removed_for(ctx, method):
        return []
    since = REMOVED_QUANTIZATION[method]
    target = ctx.target_vllm if is_known(ctx.target_vllm) else None
    return [
        finding(
            meta,
            f"{_cap(named)} is gone from vLLM {since} on; "
            + (f"vLLM {target} " if target else "a vLLM that new (the target's version is unknown) ")
            + "stops at start-up with `Unknown quantization method`.",
            "a checkpoint in another format (an FP8 or compressed-tensors one), or a vLLM older than "
            + since,
            severity=None if target else "warning",
        )
    ]


@rule(
    "quantization-needs-newer-vllm",
    "error",
    "the quantization method is newer than the target vLLM",
    [
        "vllm model_executor/layers/quantization/__init__.py QuantizationMethods, each wheel 0.22.0-0.34.0:"
        " auto_awq and fp8_per_channel from 0.24.0, nvfp4_per_token from 0.26.0, lut_b_moe,"
        " mxfp4_hadamard32 and w4afp8 from 0.34.0",
        VERIFY + ": Unknown quantization method",
    ],
)
def _r_needs_newer(ctx: LintContext, meta: Rule) -> list[Finding]:
    got = _in_effect(ctx)
    if got is None or got[0] not in ADDED_QUANTIZATION or not is_known(ctx.target_vllm):
        return []
    since = ADDED_QUANTIZATION[got[0]]
    if at_least(ctx.target_vllm, since):
        return []
    return [
        finding(
            meta,
            f"{_cap(got[1])} came with vLLM {since}; vLLM {ctx.target_vllm} stops at "
            "start-up with `Unknown quantization method`.",
            f"vLLM {since} or newer for this checkpoint, or a checkpoint in a format vLLM "
            f"{ctx.target_vllm} reads (FP8, compressed-tensors, AWQ/GPTQ)",
        )
    ]


@rule(
    "quantization-mismatch",
    "warning",
    "--quantization differs from the checkpoint's quantization_config",
    [VERIFY + ": Quantization method specified in the model config (...) does not match"],
)
def _r_mismatch(ctx: LintContext, meta: Rule) -> list[Finding]:
    method, q = _flag(ctx), ctx.facts.quantization
    if method is None or q is None or q.online or method in _TAKES_OVER:
        return []
    given, theirs = _FAMILY.get(method, method), _FAMILY.get(q.method.lower(), q.method.lower())
    if given == theirs or theirs not in VLLM_QUANTIZATION_METHODS:
        return []
    return [
        finding(
            meta,
            f"The checkpoint is already quantized ({q.method}); vLLM refuses --quantization {method} for "
            "it (`Quantization method specified in the model config does not match`) unless the "
            "checkpoint's method converts to it. The plan prices the checkpoint's own scheme.",
            "leave --quantization out: vLLM reads the checkpoint's quantization_config",
        )
    ]


@rule(
    "quantization-online",
    "info",
    "--quantization on a full-precision checkpoint: vLLM quantizes the weights while loading",
    [
        "vllm 0.22.0 vllm/config/quantization.py (_ONLINE_SHORTHANDS), quantization/online/*.py, "
        "quantization/fp8.py Fp8OnlineLinearMethod (meta-device weights, quantized layer by layer)",
    ],
)
def _r_online(ctx: LintContext, meta: Rule) -> list[Finding]:
    q = ctx.facts.quantization
    if q is None or not q.online:
        return []
    parts = ONLINE_QUANTIZATION[q.method][1]
    what = {"experts": "the MoE experts", "linear": "the linear layers (not the MoE experts)"}.get(
        parts, "the linear layers and MoE experts"
    )
    return [
        finding(
            meta,
            f"--quantization {q.method}: vLLM quantizes {what} of this {ctx.facts.dtype} checkpoint while "
            f"loading ({q.scheme}, {q.weight_bytes_per_param:.3g} B a weight); embeddings, lm_head and "
            f"norms stay {ctx.facts.dtype}. The plan's weights and KV cache count that.",
            None,
        )
    ]
