"""Probes of reasoning: the split, the per-request switch, the default, the content-null trap."""

from __future__ import annotations

from typing import Any

import httpx

from llmdeck.checks.clients import AGENT_CLIENTS
from llmdeck.checks.probe_base import (
    Outcome,
    ProbeContext,
    _content,
    _finish,
    _http_fail,
    _message,
    _not_a_completion,
    _reasoning,
)


def _tokenize(ctx: ProbeContext, kwargs: dict[str, Any] | None) -> list[int] | None:
    body: dict[str, Any] = {
        "model": ctx.facts.model,
        "messages": [{"role": "user", "content": "Hi"}],
        "add_generation_prompt": True,
    }
    if kwargs is not None:
        body["chat_template_kwargs"] = kwargs
    reply = ctx.post("/tokenize", body)
    if not reply.ok or not isinstance(reply.data, dict):
        return None
    tokens = reply.data.get("tokens")
    return [int(t) for t in tokens] if isinstance(tokens, list) else None


def learn_thinking(ctx: ProbeContext) -> None:
    """Render the chat template three ways through /tokenize: default, thinking on, thinking off.

    The template honours ``enable_thinking`` when on and off differ; the server default is whichever
    of the two the bare request equals (vLLM applies --default-chat-template-kwargs in /tokenize too).
    A /tokenize that times out or breaks leaves the template unknown (the probes then ask the chat API
    itself): this runs outside any probe, so its errors must not escape the check.
    """
    saved, ctx.evidence = ctx.evidence, []
    try:
        default = _tokenize(ctx, None)
        on = _tokenize(ctx, {"enable_thinking": True}) if default is not None else None
        off = _tokenize(ctx, {"enable_thinking": False}) if on is not None else None
    except httpx.HTTPError:
        default = on = off = None
    finally:
        ctx.template_evidence, ctx.evidence = ctx.evidence, saved
    if default is None or on is None or off is None:
        return
    ctx.facts.thinking_template = on != off
    if ctx.facts.thinking_template:
        ctx.facts.thinking_default = default == on if default in (on, off) else None


def probe_reasoning_split(ctx: ProbeContext) -> Outcome:
    extra = {"chat_template_kwargs": {"enable_thinking": True}} if ctx.facts.thinking_template else {}
    reply = ctx.post(
        "/v1/chat/completions",
        ctx.chat_body([{"role": "user", "content": "What is 2+3? Think first."}], max_tokens=32, **extra),
    )
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions (thinking on)")
    msg = _message(reply)
    field_name, reasoning = _reasoning(msg)
    content = _content(msg)
    parser = ctx.facts.suggested_reasoning_parser or "qwen3"
    if field_name:
        ctx.facts.reasoning_parser = True
        ctx.facts.reasoning_field = field_name
        return Outcome(
            "pass",
            f"The reasoning parser splits the output: {len(reasoning)} chars in `{field_name}`, "
            f"{len(content or '')} in `content`.",
            data={"field": field_name},
        )
    if content and ("<think>" in content or "</think>" in content):
        ctx.facts.reasoning_parser = False
        return Outcome(
            "fail",
            "The model's thinking (<think>…</think>) arrives inside `content`: the server has no reasoning "
            "parser, so agents show or act on the raw thoughts.",
            fix=f"Start the server with --reasoning-parser {parser}.",
        )
    if ctx.facts.thinking_template is None:
        return Outcome(
            "inconclusive",
            "No reasoning field in the reply, and /tokenize could not show whether the template thinks.",
        )
    if not ctx.facts.thinking_template:
        return Outcome("not_applicable", "The chat template has no thinking switch (enable_thinking).")
    ctx.facts.reasoning_parser = False
    return Outcome(
        "fail",
        "The chat template has a thinking mode (enable_thinking changes the prompt), but with thinking on "
        "the reply has no `reasoning` field and everything lands in `content`: the server runs without a "
        "reasoning parser.",
        fix=f"Start the server with --reasoning-parser {parser}.",
    )


def probe_thinking_control(ctx: ProbeContext) -> Outcome:
    if ctx.facts.thinking_template is None:
        return Outcome(
            "inconclusive", "/tokenize is not available, so the template's thinking switch is unknown."
        )
    if not ctx.facts.thinking_template:
        return Outcome("not_applicable", "The chat template has no thinking switch.")
    reply = ctx.post(
        "/v1/chat/completions",
        ctx.chat_body(
            [{"role": "user", "content": "Say hello."}],
            max_tokens=16,
            chat_template_kwargs={"enable_thinking": False},
        ),
    )
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions with enable_thinking false")
    msg = _message(reply)
    field_name, reasoning = _reasoning(msg)
    if field_name:
        return Outcome(
            "fail",
            f"With chat_template_kwargs enable_thinking=false the reply still has {len(reasoning)} chars in "
            f"`{field_name}` (known with some templates: vllm issue #53284).",
            fix="Upgrade vLLM, or check the chat template's handling of enable_thinking.",
        )
    return Outcome(
        "pass",
        'chat_template_kwargs {"enable_thinking": false} turns thinking off: the prompt closes the think '
        f"block and the reply has no reasoning ({len(_content(msg) or '')} chars of content).",
    )


def probe_thinking_default(ctx: ProbeContext) -> Outcome:
    ctx.evidence.extend(ctx.template_evidence)
    if ctx.facts.thinking_template is None:
        return Outcome("inconclusive", "/tokenize is not available, so the server default is unknown.")
    if not ctx.facts.thinking_template:
        return Outcome("not_applicable", "The chat template has no thinking switch.")
    if ctx.facts.thinking_default is None:
        return Outcome("inconclusive", "The default prompt matches neither thinking on nor off.")
    if not ctx.facts.thinking_default:
        return Outcome(
            "pass",
            "Thinking is off unless a request asks for it (the server sets "
            "--default-chat-template-kwargs '{\"enable_thinking\": false}').",
        )
    fix = (
        "Start the server with --default-chat-template-kwargs '{\"enable_thinking\": false}' "
        "(vllm PR #31343), or have the client send chat_template_kwargs on every request."
    )
    if ctx.client in AGENT_CLIENTS:
        return Outcome(
            "warn",
            f"Thinking is ON by default: every {ctx.client} turn spends tokens on hidden reasoning first "
            "(seed 000: slow turns, empty answers when max_tokens is small).",
            fix=fix,
        )
    return Outcome(
        "pass", "Thinking is on by default; requests can turn it off with chat_template_kwargs.", fix=fix
    )


def probe_content_null_trap(ctx: ProbeContext) -> Outcome:
    budget = 24
    reply = ctx.post(
        "/v1/chat/completions",
        ctx.chat_body([{"role": "user", "content": "Explain recursion in detail."}], max_tokens=budget),
    )
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions")
    if (broken := _not_a_completion(reply, "POST /v1/chat/completions")) is not None:
        return broken
    msg = _message(reply)
    content = _content(msg)
    field_name, reasoning = _reasoning(msg)
    finish = _finish(reply)
    data = {
        "max_tokens": budget,
        "finish_reason": finish,
        "content_null": not content,
        "reasoning_chars": len(reasoning),
    }
    if not content and finish == "length" and field_name:
        return Outcome(
            "warn",
            f"Reproduced: with max_tokens={budget} and the server's default thinking, all tokens went to "
            f"`{field_name}` and the reply is content: null with finish_reason: length — a client that only "
            "reads `content` gets nothing.",
            fix="Turn thinking off by default (--default-chat-template-kwargs "
            "'{\"enable_thinking\": false}') or per request, or give requests a larger max_tokens.",
            data=data,
        )
    if not content and finish == "length":
        return Outcome(
            "inconclusive", "content is empty at finish_reason length, with no reasoning.", data=data
        )
    return Outcome("pass", f"A small budget still yields content (finish_reason {finish}).", data=data)
