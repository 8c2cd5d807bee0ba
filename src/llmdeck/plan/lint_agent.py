"""Lint rules for agents: tool-call and reasoning parsers, thinking defaults, chat-template flags."""

from __future__ import annotations

import shlex

from llmdeck.plan.lint_base import (
    DEFAULT_REASONING,
    FACTS,
    Finding,
    LintContext,
    Rule,
    expected_reasoning_parser,
    expected_tool_parser,
    finding,
    is_coder,
    is_thinking_model,
    rule,
    same_parser,
)


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
    if not isinstance(given, str) or want is None or same_parser("tool", given, want, ctx.target_vllm):
        return []
    return [
        finding(
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
        finding(
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
        finding(
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
        finding(
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
        if want is None and (ctx.entry is not None or is_coder(ctx)):
            return [
                finding(
                    meta,
                    f"{ctx.model_name} does not think (no <think> block), so --reasoning-parser {given} has "
                    "nothing to parse and may move plain answers into `reasoning`.",
                    f"Remove --reasoning-parser {given}.",
                    "warning",
                )
            ]
        if want is not None and not same_parser("reasoning", given, want, ctx.target_vllm):
            return [
                finding(
                    meta,
                    f"--reasoning-parser {given} does not match {ctx.model_name}; this family needs {want}.",
                    f"--reasoning-parser {want}",
                )
            ]
        return []
    if want is not None and ctx.facts.model_type in DEFAULT_REASONING:
        return []  # vLLM sets this family's reasoning parser itself
    if want is not None and is_thinking_model(ctx):
        return [
            finding(
                meta,
                f"{ctx.model_name} thinks by default, and without --reasoning-parser {want} its <think> "
                "text lands in `content`, where agents read it as the answer.",
                f"--reasoning-parser {want}",
                "warning",
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
        finding(
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
        finding(
            meta,
            "vllm serve has no --chat-template-kwargs flag; it exits with `unrecognized arguments`.",
            f"--default-chat-template-kwargs {shlex.quote(value) if isinstance(value, str) else '...'}",
        )
    ]
