"""The probes of the two non-chat surfaces: Anthropic Messages (Claude Code) and Responses (Codex).

Each asks the server what the real client asks, in that API's shape, and parses the stream the
way the client does (:mod:`llmdeck.checks.surfaces_stream`). A random model cannot be trusted to
call a tool or think: the server's part (it accepts the shape, splits the output, takes the tool
result back) is kept apart from the model's ("inconclusive").
"""

from __future__ import annotations

from typing import Any

from llmdeck.checks.http import Reply
from llmdeck.checks.probe_base import TOOLS, Outcome, ProbeContext
from llmdeck.checks.surfaces_stream import parse_messages_stream, parse_responses_stream
from llmdeck.checks.traffic import Recording
from llmdeck.util.jsonsafe import loads as json_loads

MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
SYSTEM_WORDS = ("system message", "system messages", "must be at the beginning")
ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
TOOL_ARGS = '{"city": "Paris"}'


def _missing(reply: Reply, path: str, rec: Recording) -> Outcome | None:
    """A 404/405 on the client's surface: the server does not serve it."""
    if reply.status_code not in (404, 405):
        return None
    api = "Anthropic Messages API" if path.startswith(MESSAGES) else "Responses API"
    return Outcome(
        "fail",
        f"The server has no {path} (HTTP {reply.status_code}): {rec.label} speaks only the {api}.",
        fix="Serve it with vLLM >= 0.12 (it serves /v1/messages and /v1/responses natively), or put "
        "`llmdeck gateway` in front of a server that has them; an OpenAI-only server cannot serve "
        f"{rec.client}.",
    )


def _refused(reply: Reply, path: str, rec: Recording, what: str) -> Outcome:
    return _missing(reply, path, rec) or Outcome(
        "fail",
        f"{what}: HTTP {reply.status_code}: {reply.error_message()}",
        data={"status_code": reply.status_code},
    )


def _msg_body(
    ctx: ProbeContext, messages: list[dict[str, Any]], max_tokens: int, **extra: Any
) -> dict[str, Any]:
    return {"model": ctx.facts.model, "max_tokens": max_tokens, "messages": messages, "stream": True, **extra}


def probe_messages_stream(ctx: ProbeContext, rec: Recording) -> Outcome:
    body = _msg_body(ctx, [{"role": "user", "content": "Say hi."}], 16)
    reply = ctx.stream(MESSAGES + "?beta=true", body)
    if not reply.ok:
        return _refused(reply, MESSAGES, rec, "A streamed Messages request")
    got = parse_messages_stream(reply.chunks)
    if got.error:
        return Outcome("fail", f"The stream breaks {rec.client}'s parser: {got.error}.")
    if not got.stopped:
        return Outcome("fail", "The stream ended without message_stop: the client waits for the end.")
    if got.input_tokens is None or got.output_tokens is None:
        return Outcome(
            "warn",
            "The stream carries no usage (message_start / message_delta): the client cannot count tokens.",
            fix="Upgrade vLLM (0.32 sends both).",
        )
    return Outcome(
        "pass",
        f"message_start .. message_stop, stop_reason {got.stop_reason}, usage {got.input_tokens} in / "
        f"{got.output_tokens} out.",
    )


def probe_messages_tools(ctx: ProbeContext, rec: Recording) -> Outcome:
    ask = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
    choice = {"type": "tool", "name": "get_weather"}
    off = {"type": "disabled"}  # the call starts at once, not after a thought cut at max_tokens
    reply = ctx.stream(
        MESSAGES, _msg_body(ctx, ask, 64, tools=ANTHROPIC_TOOLS, tool_choice=choice, thinking=off)
    )
    if not reply.ok:
        message = reply.error_message()
        out = _refused(reply, MESSAGES, rec, "A Messages request with tools")
        if "tool-call-parser" in message or "tool choice" in message:
            out.fix = ctx.parser_fix()
        return out
    got = parse_messages_stream(reply.chunks)
    if got.bad_input:
        cut = "cut at max_tokens" if got.stop_reason == "max_tokens" else "not what a real model writes"
        return Outcome(
            "inconclusive",
            f"A tool_use block streamed as {rec.client} parses it, but the model's input is {cut} "
            f"({got.bad_input}; a random model).",
        )
    if got.error:
        return Outcome(
            "fail", f"The streamed tool_use breaks {rec.client}'s parser: {got.error}.", fix=ctx.parser_fix()
        )
    use = got.tool_uses[0] if got.tool_uses else {"id": "toolu_llmdeck", "name": "get_weather", "input": {}}
    as_text = "<tool_call>" in got.text or "<function=" in got.text
    if not got.tool_uses and as_text and ctx.facts.tool_parser is False:
        return Outcome(
            "fail",
            "The tool call arrives as text, not a tool_use block (forced tool_choice).",
            fix=ctx.parser_fix(),
        )
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": "Sunny."}
    history: list[dict[str, Any]] = [
        *ask,
        {"role": "assistant", "content": [{"type": "tool_use", **use}]},
        {"role": "user", "content": [result]},
    ]
    back = ctx.stream(MESSAGES, _msg_body(ctx, history, 16, tools=ANTHROPIC_TOOLS))
    if not back.ok:
        return _refused(back, MESSAGES, rec, "The tool_result sent back")
    if not got.tool_uses:
        return Outcome(
            "inconclusive",
            "The server takes tool_use / tool_result blocks back, but the model wrote "
            + ("an unparsed call in text, cut or invalid" if as_text else "no tool_use")
            + " (vLLM 0.32 does not force tool_choice on /v1/messages; a random model).",
        )
    return Outcome(
        "pass",
        f"tool_use {use['name']}({use['input']}) streamed as input_json_delta, and its "
        "tool_result is taken back.",
    )


def probe_messages_thinking(ctx: ProbeContext, rec: Recording) -> Outcome:
    ask = [{"role": "user", "content": "What is 2+3? Think first."}]
    body = _msg_body(ctx, ask, 48, thinking={"type": "adaptive"})  # what Claude Code sends
    reply = ctx.stream(MESSAGES, body)
    if not reply.ok:
        return _refused(reply, MESSAGES, rec, "A Messages request with thinking")
    got = parse_messages_stream(reply.chunks)
    if got.thinking:
        return Outcome(
            "pass",
            f"Thinking arrives in thinking blocks ({len(got.thinking)} chars), which {rec.client} reads.",
        )
    if not got.text.strip() and ctx.facts.thinking_template:
        return Outcome(
            "inconclusive",
            "The model ended its reply before writing anything (no thinking, no text): nothing to judge.",
        )
    if "<think>" in got.text or "</think>" in got.text or ctx.facts.thinking_template:
        return Outcome(
            "fail",
            f"The thoughts arrive inside text blocks: {rec.client} shows them as the answer.",
            fix="Start the server with --reasoning-parser "
            f"{ctx.facts.suggested_reasoning_parser or 'qwen3'}.",
        )
    return Outcome("not_applicable", "The model does not think (no thinking in the stream).")


def probe_messages_count_tokens(ctx: ProbeContext, rec: Recording) -> Outcome:
    body = {k: v for k, v in rec.agent.body.items() if k in ("system", "messages", "tools")}
    reply = ctx.post(MESSAGES + "/count_tokens?beta=true", {"model": ctx.facts.model, **body})
    if not reply.ok:
        out = _refused(reply, MESSAGES + "/count_tokens", rec, "count_tokens")
        out.status, out.fix = "warn", "vLLM 0.32 serves /v1/messages/count_tokens; upgrade for it."
        return out
    count = reply.data.get("input_tokens") if isinstance(reply.data, dict) else None
    if not isinstance(count, int):
        return Outcome("fail", f"count_tokens answered without input_tokens: {reply.text[:200]}")
    return Outcome(
        "pass", f"{rec.label}'s base prompt counts {count} input tokens.", data={"input_tokens": count}
    )


def probe_messages_system(ctx: ProbeContext, rec: Recording) -> Outcome:
    """Claude Code sends a second system message mid-conversation (the recorded request has one)."""
    msgs = [
        {"role": "user", "content": "Hello."},
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Say hi."},
    ]
    reply = ctx.stream(MESSAGES, _msg_body(ctx, msgs, 8, system="You are a coding agent."))
    if reply.ok:
        return Outcome("pass", "A system message after the first user message is accepted.")
    message = reply.error_message()
    out = _refused(reply, MESSAGES, rec, "A second system message")
    fold = "or serve the client through `llmdeck gateway` with `messages: {fold_system: true}` on its route"
    if "'user' or 'assistant'" in message:  # vLLM 0.22.0's Messages API (measured on the H200)
        out.summary += (
            f" — this vLLM's Messages API takes no system role in `messages`, which {rec.client} sends"
        )
        out.fix = f"Upgrade vLLM (0.32 takes it), {fold}."
    elif any(w in message.lower() for w in SYSTEM_WORDS):
        out.summary += (
            f" — the chat template refuses a system message mid-conversation, which {rec.client} sends"
        )
        out.fix = (
            "Serve the model with a chat template that accepts later system messages "
            f"(--chat-template; vllm#41114 for Qwen3.6), {fold}."
        )
    return out


def _resp_body(
    ctx: ProbeContext, items: list[dict[str, Any]], max_tokens: int, **extra: Any
) -> dict[str, Any]:
    return {
        "model": ctx.facts.model,
        "input": items,
        "max_output_tokens": max_tokens,
        "stream": True,
        "store": False,
        **extra,
    }


def probe_responses_stream(ctx: ProbeContext, rec: Recording) -> Outcome:
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hi."}]}]
    reply = ctx.stream(RESPONSES, _resp_body(ctx, items, 16, instructions="You are a coding agent."))
    if not reply.ok:
        return _refused(reply, RESPONSES, rec, "A streamed Responses request")
    got = parse_responses_stream(reply.chunks)
    if not got.completed:
        return Outcome(
            "fail",
            f"The stream ended without response.completed: {rec.client} retries it "
            "('stream disconnected before completion').",
        )
    if got.usage is None:
        return Outcome("warn", "response.completed carries no usage: the client cannot count its context.")
    tokens = f"{got.usage.get('input_tokens')} in / {got.usage.get('output_tokens')} out"
    return Outcome("pass", f"response.created .. response.completed, usage {tokens}.")


def _json_args(arguments: Any) -> str:
    """The call's arguments as resent; a random model's cut or invalid JSON is resent as valid JSON.

    A real model's arguments parse (the client resends them as they came); resending the random model's
    cut string would test the model (vLLM 0.22 answers 400 ``Unterminated string`` when it parses them
    into the template), not the server's handling of the items.
    """
    if isinstance(arguments, str):
        try:
            json_loads(arguments)
        except ValueError:
            return TOOL_ARGS
        return arguments
    return TOOL_ARGS


def probe_responses_tools(ctx: ProbeContext, rec: Recording) -> Outcome:
    """function_call / function_call_output over three turns, the whole history resent (store: false)."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]}
    ]
    called = False
    for turn in (1, 2, 3):
        choice = {"type": "function", "name": "get_weather"}
        extra = {"tools": RESPONSES_TOOLS, "tool_choice": choice, "reasoning": {"effort": "none"}}
        reply = ctx.stream(RESPONSES, _resp_body(ctx, items, 48, **extra))
        if not reply.ok:
            out = _refused(reply, RESPONSES, rec, f"Turn {turn} of a function-call loop (store: false)")
            if turn > 1:
                out.fix = (
                    "The server refuses function_call / function_call_output items resent as input "
                    "(vllm#33089, #43244): upgrade vLLM."
                )
            elif "tool-call-parser" in reply.error_message():
                out.fix = ctx.parser_fix()
            return out
        got = parse_responses_stream(reply.chunks)
        if not got.completed:
            return Outcome("fail", f"Turn {turn}: the stream ended without response.completed.")
        call = next((c for c in got.calls if c.get("name")), None)
        called = called or call is not None
        call = call or {"call_id": f"call_llmdeck_{turn}", "name": "get_weather", "arguments": TOOL_ARGS}
        items += [
            {
                "type": "function_call",
                "call_id": call.get("call_id"),
                "name": call["name"],
                "arguments": _json_args(call.get("arguments")),
            },
            {"type": "function_call_output", "call_id": call.get("call_id"), "output": "Sunny, 21 C."},
        ]
    if not called:
        return Outcome(
            "inconclusive",
            "Three turns of function_call / function_call_output items are taken "
            "back, but the model wrote no function_call (vLLM 0.32 does not force tool_choice on "
            "/v1/responses; a random model).",
        )
    return Outcome(
        "pass",
        "function_call items stream and three turns of function_call_output resent "
        "with store: false are taken back.",
    )
