"""The linter's frame: findings, rules (each with its evidence and the vLLM versions it holds for),
the context every rule reads, and the family expectations (parsers) the rules share.

A rule bound to a version range applies only where the target vLLM is in it; when the target is
unknown (an image tag like ``latest`` or ``nightly``, an unknown image) its errors become
warnings that name the versions concerned (:func:`apply_versions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.catalog.entries import CatalogEntry
from llmdeck.plan.flags import VllmFlags
from llmdeck.plan.machine import MachineProfile
from llmdeck.plan.memory import MemoryPlan, ServeSettings
from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.versions import ALL_VERSIONS, VersionRange, at_least, is_known

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
    versions: str = Field("all vLLM versions", description="the vLLM versions the rule holds for")


class Rule(BaseModel):
    id: str
    severity: Severity
    title: str
    evidence: list[str]
    versions: VersionRange = Field(default_factory=VersionRange)


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
    lone_config: str | None = None  # a config file planned alone (no folder, no hub id): MODEL_DIR serves


RULES: dict[str, Rule] = {}
CHECKS: list[tuple[Rule, Callable[[LintContext], list[Finding]]]] = []
RuleFn = Callable[[LintContext, Rule], list[Finding]]


def rule(
    rule_id: str, severity: Severity, title: str, evidence: list[str], versions: VersionRange = ALL_VERSIONS
) -> Callable[[RuleFn], RuleFn]:
    meta = Rule(id=rule_id, severity=severity, title=title, evidence=evidence, versions=versions)
    RULES[rule_id] = meta

    def deco(fn: RuleFn) -> RuleFn:
        CHECKS.append((meta, lambda ctx: fn(ctx, meta)))
        return fn

    return deco


def finding(meta: Rule, message: str, fix: str | None, severity: Severity | None = None) -> Finding:
    return Finding(
        rule=meta.id,
        severity=severity or meta.severity,
        message=message,
        fix=fix,
        evidence=list(meta.evidence),
        versions=meta.versions.describe(),
    )


def apply_versions(meta: Rule, found: list[Finding], target: str | None, source: str) -> list[Finding]:
    """Keep a version-bound rule's findings only where they hold; soften them for an unknown target."""
    if meta.versions.is_all or not found:
        return found
    if is_known(target) and target is not None:
        return found if meta.versions.contains(target) else []
    out = []
    for f in found:
        note = (
            f" (This holds for {meta.versions.describe()}; the target vLLM is unknown — {source} — so "
            "check which version it runs.)"
        )
        sev: Severity = "warning" if f.severity == "error" else f.severity
        out.append(f.model_copy(update={"severity": sev, "message": f.message + note}))
    return out


# ---- family expectations ------------------------------------------------------------------

# model_type → (tool-call parser, reasoning parser) when no catalog entry says otherwise.
# gpt-oss: vllm 0.22.0 entrypoints/openai/tool_parsers `openai`, reasoning `openai_gptoss`
# (model_executor/models/config.py:153-156 sets it when none is given); GLM-4.7: `glm47`, `glm45`.
FAMILY_PARSERS: dict[str, tuple[str | None, str | None]] = {
    "gpt_oss": ("openai", "openai_gptoss"),
    "glm4_moe_lite": ("glm47", "glm45"),
    "glm4_moe": ("glm45", "glm45"),
    "llama": ("llama3_json", None),
    "mistral": ("mistral", None),
    "deepseek_v3": ("deepseek_v3", "deepseek_r1"),
}
# Reasoning parsers vLLM sets by itself when none is given (so a missing flag is no error).
DEFAULT_REASONING = {"gpt_oss"}
# Parser names that load one class, from the release that first does (tool_parsers/__init__.py and
# reasoning/__init__.py of every wheel 0.22.0-0.34.0): giving one for the other is no mistake there.
PARSER_ALIASES: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("tool", "0.22.0", frozenset({"llama3_json", "llama4_json"})),  # Llama3Json / LlamaJsonEngine
    ("tool", "0.24.0", frozenset({"glm45", "glm47"})),  # Glm47MoeModelToolParser
    ("tool", "0.24.0", frozenset({"qwen3_coder", "qwen3_xml"})),  # Qwen3EngineToolParser
    ("tool", "0.32.0", frozenset({"hermes", "qwen3_json"})),  # Hermes2ProToolParser
    ("reasoning", "0.24.0", frozenset({"glm45", "glm47"})),  # Glm47MoeParserReasoningAdapter
)


def same_parser(kind: str, given: str, want: str, target: str | None) -> bool:
    """``given`` is ``want`` for the target vLLM (the same name, or an alias of one class there)."""
    return given == want or any(
        k == kind and {given, want} <= names and at_least(target, since) for k, since, names in PARSER_ALIASES
    )


def is_coder(ctx: LintContext) -> bool:
    if ctx.entry is not None:
        return ctx.entry.family == "qwen3-coder"
    return "coder" in ctx.model_name.lower()


def expected_tool_parser(ctx: LintContext) -> str | None:
    if ctx.entry is not None:
        return ctx.entry.tool_call_parser
    mt = ctx.facts.model_type
    if mt in FAMILY_PARSERS:
        return FAMILY_PARSERS[mt][0]
    if mt.startswith(("qwen3_5", "qwen3_next")) or (mt.startswith("qwen3") and is_coder(ctx)):
        return "qwen3_coder"
    if mt.startswith("qwen3"):
        return "hermes"
    return None


def expected_reasoning_parser(ctx: LintContext) -> str | None:
    if ctx.entry is not None:
        return ctx.entry.reasoning_parser
    mt = ctx.facts.model_type
    if mt in FAMILY_PARSERS:
        return FAMILY_PARSERS[mt][1]
    if mt.startswith("qwen3") and not is_coder(ctx) and "instruct-2507" not in ctx.model_name.lower():
        return "qwen3"
    return None


def is_thinking_model(ctx: LintContext) -> bool:
    if ctx.entry is not None:
        return ctx.entry.thinking
    if ctx.facts.model_type in DEFAULT_REASONING:
        return False  # always reasons (harmony); effort, not an on/off switch
    return expected_reasoning_parser(ctx) is not None
