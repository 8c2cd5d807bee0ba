"""Probes of tool calling and of the long context."""

from __future__ import annotations

from typing import Any

import httpx

from llmdeck.checks.probe_base import (
    NAMED_TOOL_ERROR,
    TOOLS,
    Outcome,
    ProbeContext,
    _content,
    _finish,
    _http_fail,
    _looks_like_text_tool_call,
    _message,
    _not_a_completion,
    _tool_calls,
    _valid_call,
)


def probe_tool_auto(ctx: ProbeContext) -> Outcome:
    body = ctx.chat_body(
        [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
        max_tokens=64,
        tools=TOOLS,
        tool_choice="auto",
        chat_template_kwargs=ctx.no_thinking(),
    )
    reply = ctx.post("/v1/chat/completions", body)
    if reply.status_code == 400 and "enable-auto-tool-choice" in reply.error_message():
        ctx.facts.auto_tool_choice = False
        return Outcome(
            "fail",
            f"The server rejects tools with tool_choice auto (HTTP 400: {reply.error_message()}). Agents "
            "send exactly this request, so they get errors or no tool use at all.",
            fix=ctx.parser_fix(),
        )
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions with tools")
    ctx.facts.auto_tool_choice = True
    msg = _message(reply)
    calls = _tool_calls(msg)
    if calls:
        ctx.facts.tool_parser = True
        if all(_valid_call(c) for c in calls):
            names = ", ".join(str((c.get("function") or {}).get("name")) for c in calls)
            return Outcome("pass", f"The server accepts auto tool choice and parsed a tool call ({names}).")
        return Outcome(
            "fail",
            "The parser returned a tool call with an unknown name or arguments that are not a JSON object.",
            fix=ctx.parser_fix(),
        )
    content = _content(msg)
    if _looks_like_text_tool_call(content):
        return Outcome(
            "fail",
            "The model wrote a tool call as text but the server returned it in `content` instead of "
            "`tool_calls`: the --tool-call-parser does not match this model's format (seed 004: opencode "
            "then shows nothing).",
            fix=ctx.parser_fix(),
        )
    return Outcome(
        "inconclusive",
        "The server accepts tools with tool_choice auto (no HTTP 400), but the model's output is not a tool "
        "call (expected with random weights).",
    )


def probe_tool_named(ctx: ProbeContext) -> Outcome:
    body = ctx.chat_body(
        [{"role": "user", "content": "Weather in Tokyo?"}],
        max_tokens=64,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        chat_template_kwargs=ctx.no_thinking(),
    )
    reply = ctx.post("/v1/chat/completions", body)
    if reply.status_code == 400:
        message = reply.error_message()
        if NAMED_TOOL_ERROR in message:
            ctx.facts.tool_parser = False
        return Outcome(
            "fail",
            f"The server rejects a named tool_choice (HTTP 400: {message}).",
            fix=ctx.parser_fix(),
        )
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions with a named tool")
    calls = _tool_calls(_message(reply))
    if calls and calls[0].get("function", {}).get("name") == "get_weather" and _valid_call(calls[0]):
        args = calls[0]["function"]["arguments"]
        return Outcome("pass", f"Named tool choice returns a get_weather call with JSON arguments {args}.")
    if _finish(reply) == "length":
        return Outcome(
            "inconclusive",
            "The server accepted the named tool choice, but the arguments were cut at max_tokens (the model "
            "kept writing inside the JSON).",
        )
    return Outcome(
        "inconclusive",
        "The server accepted the named tool choice, but the reply holds no complete get_weather call.",
    )


def probe_tool_parallel(ctx: ProbeContext) -> Outcome:
    body = ctx.chat_body(
        [{"role": "user", "content": "Get the weather in Paris and the time in JST, both at once."}],
        max_tokens=128,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=True,
        chat_template_kwargs=ctx.no_thinking(),
    )
    reply = ctx.post("/v1/chat/completions", body)
    if reply.status_code == 400:
        return Outcome(
            "fail",
            "The server rejects tool_choice required with parallel calls "
            f"(HTTP 400: {reply.error_message()}).",
            fix=ctx.parser_fix(),
        )
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions (parallel tools)")
    calls = _tool_calls(_message(reply))
    valid = [c for c in calls if _valid_call(c)]
    if len(valid) >= 2:
        ids = {c.get("id") for c in valid}
        if len(ids) < len(valid):
            return Outcome("fail", "Parallel tool calls share an id; the client cannot match the results.")
        return Outcome("pass", f"{len(valid)} tool calls in one reply, each with its own id.")
    if len(valid) == 1:
        return Outcome(
            "inconclusive",
            "The server accepted parallel tool calls and returned one valid call; the model chose one.",
        )
    return Outcome(
        "inconclusive",
        f"The server accepted the request, but the model's output is not a complete tool call "
        f"(finish_reason {_finish(reply)}).",
    )


def probe_tool_result(ctx: ProbeContext) -> Outcome:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_llmdeck_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_llmdeck_1", "content": '{"temp_c": 21, "sky": "clear"}'},
    ]
    choice = "auto" if ctx.facts.auto_tool_choice is not False else "none"
    body = ctx.chat_body(
        messages, max_tokens=16, tools=TOOLS, tool_choice=choice, chat_template_kwargs=ctx.no_thinking()
    )
    reply = ctx.post("/v1/chat/completions", body)
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions with a tool result")
    if choice == "none":
        return Outcome(
            "fail",
            "The chat template accepts a `tool` message (with tool_choice none), but an agent's follow-up "
            "request carries tool_choice auto, which this server rejects.",
            fix=ctx.parser_fix(),
        )
    if (broken := _not_a_completion(reply, "POST /v1/chat/completions with a tool result")) is not None:
        return broken
    msg = _message(reply)
    return Outcome(
        "pass",
        "The server takes the assistant tool_calls + `tool` message round trip with tool_choice auto "
        f"(reply: {len(_content(msg) or '')} chars, finish_reason {_finish(reply)}).",
    )


def _filler_token(ctx: ProbeContext) -> int | None:
    reply = ctx.post("/tokenize", {"model": ctx.facts.model, "prompt": " hello", "add_special_tokens": False})
    if reply.ok and isinstance(reply.data, dict):
        tokens = reply.data.get("tokens")
        if isinstance(tokens, list) and tokens:
            return int(tokens[-1])
    return None


def probe_long_context(ctx: ProbeContext) -> Outcome:
    mml = ctx.facts.max_model_len
    if not mml:
        return Outcome("inconclusive", "The server did not report max_model_len.")
    token = _filler_token(ctx)
    if token is None:
        return Outcome("inconclusive", "/tokenize is not available to build an exact-length prompt.")
    near = mml - 8
    if ctx.long_context_tokens is not None:
        near = max(16, min(near, ctx.long_context_tokens))
    body = {"model": ctx.facts.model, "prompt": [token] * near, "max_tokens": 4, "temperature": 0}
    try:
        reply = ctx.http.request("POST", "/v1/completions", body, timeout=ctx.long_context_timeout)
    except httpx.TimeoutException:
        return Outcome(
            "inconclusive",
            f"A {near}-token prompt took longer than {ctx.long_context_timeout:.0f} s.",
            fix="Try again with --long-context-tokens N (a smaller prompt) on slow hardware.",
        )
    ctx.evidence.append(reply.exchange)
    over = ctx.post("/v1/completions", {**body, "prompt": [token] * (mml + 1), "max_tokens": 1})
    data = {"prompt_tokens": near, "max_model_len": mml, "seconds": reply.exchange.seconds}
    if not reply.ok:
        return Outcome(
            "fail",
            f"A {near}-token prompt (max_model_len {mml}) failed with HTTP {reply.status_code}: "
            f"{reply.error_message()}",
            fix="Lower --max-model-len to what the KV cache and memory really hold (see `llmdeck plan`).",
            data=data,
        )
    if over.ok:
        return Outcome(
            "fail",
            f"A {near}-token prompt works, but one of {mml + 1} tokens (over max_model_len) was accepted "
            "too.",
            data=data,
        )
    scope = "near" if near >= mml - 8 else "capped at"
    return Outcome(
        "pass",
        f"A {near}-token prompt ({scope} max_model_len {mml}) answered in {reply.exchange.seconds} s; "
        f"{mml + 1} tokens are refused with HTTP {over.status_code}.",
        data=data,
    )
