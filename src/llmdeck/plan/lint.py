"""The vLLM flag linter: every rule has an id, a severity, a message, a fix, its evidence, and
the vLLM versions it holds for.

Evidence is a section of ``shared/knowledge/vllm-facts.md``, a vLLM PR/issue, a file:line of
vLLM's source (0.22.0 and 0.33.0 wheels), or a real log in ``shared/fixtures/``. Rules live in
topic modules (``lint_cli``, ``lint_hybrid``, ``lint_agent``, ``lint_memory``, ``lint_parallel``,
``lint_prefix``, ``lint_quant``) and register in
:data:`RULES` (``llmdeck plan --json`` shows them; every rule has a test in ``tests/unit/test_plan_lint.py``).
"""

from __future__ import annotations

from llmdeck.plan import (
    lint_agent,
    lint_cli,
    lint_hybrid,
    lint_memory,
    lint_parallel,
    lint_prefix,
    lint_quant,
)
from llmdeck.plan.lint_base import CHECKS, RULES, Finding, LintContext, Rule, apply_versions
from llmdeck.plan.versions import version_tuple

__all__ = ["RULES", "Finding", "LintContext", "Rule", "lint", "version_tuple"]
_RULE_MODULES = (lint_agent, lint_cli, lint_hybrid, lint_memory, lint_parallel, lint_prefix, lint_quant)


def lint(ctx: LintContext, *, target_source: str = "unknown") -> list[Finding]:
    """Run every rule that holds for the target vLLM; errors first, then warnings, then infos."""
    findings: list[Finding] = []
    for meta, check in CHECKS:
        findings.extend(apply_versions(meta, check(ctx), ctx.target_vllm, target_source))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: order[f.severity])
