"""The probes of `llmdeck check --client X` that replay what the real client X sends.

They run after the generic probes (whose facts they reuse: max_model_len, the reasoning field) and
judge the server against the client's recorded request (:mod:`llmdeck.checks.traffic`): does its
base prompt fit with room to work, does the server accept its own request with its real tools, does
a streamed tool call parse the way the client parses it, does thinking show up where it reads it.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from llmdeck.checks.probe_base import timed_out
from llmdeck.checks.probes import (
    AUTO_TOOL_ERROR,
    NAMED_TOOL_ERROR,
    REASONING_FIELDS,
    Outcome,
    ProbeContext,
)
from llmdeck.checks.probes_caps import probe_client_output_cap, probe_client_own_cap
from llmdeck.checks.results import ProbeResult
from llmdeck.checks.traffic import (
    TURN_TOKENS,
    Recording,
    budget,
    budget_words,
    load_recording,
    parse_tool_stream,
    recommend_max_model_len,
    recordings,
    replay_body,
    smallest_tool,
    tokenize_body,
)
from llmdeck.client.httpmap import http_failure_words
from llmdeck.util.jsonsafe import loads as json_loads

TITLES = {
    "client_context": "client's base prompt fits, with room to work",
    "client_request": "client's own request accepted (its real tools)",
    "client_tool_stream": "streamed tool call parses as the client parses it",
    "client_thinking": "thinking shows where the client reads it",
    "client_traffic": "recorded client traffic",
    "client_output_cap": "server's reply cap vs the client's max_tokens",
    "client_own_cap": "client's own max_tokens, set up by hand, accepted",
    "messages_stream": "Messages: streamed answer",
    "messages_tools": "Messages: tool_use / tool_result round trip",
    "messages_thinking": "Messages: thinking blocks",
    "messages_count_tokens": "Messages: count_tokens",
    "messages_system": "Messages: a second system message",
    "responses_stream": "Responses: streamed answer",
    "responses_tools": "Responses: function_call items over turns (store: false)",
}
CONTEXT_WORDS = ("maximum context length", "context length", "max_model_len", "too long")


def measure_base_tokens(ctx: ProbeContext, rec: Recording) -> tuple[int, str]:
    """The client's base prompt in tokens: the server's own count, else the recording's."""
    reply = ctx.post("/tokenize", tokenize_body(rec, ctx.facts.model or ""))
    if reply.ok and isinstance(reply.data, dict) and isinstance(reply.data.get("count"), int):
        return int(reply.data["count"]), "counted by the server's /tokenize"
    return rec.agent.prompt_tokens, "the recording's count (Qwen3 tokenizer; /tokenize did not answer)"


def overflow_words(rec: Recording) -> str:
    """What this client does on that 400, from its recording (#40: clients differ)."""
    if rec.reads.context_overflow:
        return f"{rec.label} then {rec.reads.context_overflow}"
    return f"what {rec.label} does then is not recorded"


def probe_client_context(ctx: ProbeContext, rec: Recording) -> Outcome:
    mml = ctx.facts.max_model_len
    if not mml:
        return Outcome("inconclusive", "The server reports no max_model_len; the budget cannot be judged.")
    tokens, how = measure_base_tokens(ctx, rec)
    b = budget(mml, tokens)
    data = {**b.model_dump(), "context_limit": b.context, "tools": rec.agent.tools, "counted": how}
    words = f"{rec.label}: {budget_words(b)}; {how}."
    need = recommend_max_model_len(tokens)
    fix = (
        f"Restart the server with --max-model-len {need} (or more); {rec.client} then has room for "
        f"{budget(need, tokens).turns} turns."
    )
    if not b.first_request_fits:
        return Outcome(
            "fail",
            f"{rec.label} sends {tokens} prompt tokens ({rec.agent.tools} tools) and asks for {b.output} "
            f"output: more than max_model_len {mml}. The server refuses its very first request with "
            f"HTTP 400; {overflow_words(rec)}.",
            fix=fix,
            data=data,
        )
    if not b.usable:
        return Outcome("fail", words + " It overflows within the first tool call.", fix=fix, data=data)
    if not b.ok:
        return Outcome("warn", words + " It will compact every few turns.", fix=fix, data=data)
    return Outcome("pass", words, data=data)


def probe_client_request(ctx: ProbeContext, rec: Recording) -> Outcome:
    body = replay_body(rec, ctx.facts.model or "", max_tokens=8)
    path = rec.agent.path + (f"?{rec.agent.query}" if rec.agent.query else "")
    if rec.surface == "responses":
        body["max_output_tokens"] = body.pop("max_tokens")
    if rec.surface == "messages":
        body.pop("thinking", None)  # 8 tokens leave no room for a thinking budget
    reply = ctx.stream(path, body) if body.get("stream") else ctx.post(path, body)
    if reply.status_code in (404, 405):
        from llmdeck.checks.probes_surfaces import _missing

        return _missing(reply, rec.agent.path, rec) or Outcome("fail", "unreachable")
    tools = rec.agent.tools
    if reply.ok:
        what = f"with its {tools} tool schemas" if tools else "(it sends no tools)"
        return Outcome("pass", f"The server answers {rec.label}'s own request {what}.", data={"tools": tools})
    message = reply.error_message()
    if any(w in message.lower() for w in CONTEXT_WORDS):
        need = recommend_max_model_len(rec.agent.prompt_tokens)
        return Outcome(
            "fail",
            f"The server refuses {rec.label}'s own request (HTTP {reply.status_code}: {message}).",
            fix=f"Restart the server with --max-model-len {need} or more (an llmdeck server: "
            f"`llmdeck restart NAME -- --max-model-len {need}`).",
        )
    if AUTO_TOOL_ERROR in message or NAMED_TOOL_ERROR in message:
        return Outcome(
            "fail",
            f"The server refuses {rec.label}'s tools (HTTP {reply.status_code}: {message}).",
            fix=ctx.parser_fix(),
        )
    if rec.surface == "messages" and "'user' or 'assistant'" in message:
        return Outcome(
            "fail",
            f"The server refuses {rec.label}'s own request (HTTP {reply.status_code}: {message}): it sends "
            "a second system message inside `messages`, which this vLLM's Messages API does not take "
            "(vLLM 0.22.0 refuses it, 0.32 takes it).",
            fix="Upgrade vLLM, or serve the client through `llmdeck gateway` with `messages: {fold_system: "
            "true}` on its route (the system text moves into the top-level `system`).",
        )
    if reply.status_code >= 500 or reply.status_code == 429:  # the server's trouble, not the request's
        return Outcome(
            "fail",
            f"The server failed on {rec.label}'s own request (HTTP {reply.status_code}: {message}): an "
            "error on its side (or a proxy's), not a refusal of what the client sends.",
            fix="Read the server's log (`llmdeck logs NAME`) and check again once it serves.",
        )
    return Outcome(
        "fail",
        f"The server refuses {rec.label}'s own request (HTTP {reply.status_code}: {message}); the tool "
        "schemas or a parameter it sends are not accepted.",
        fix="See the server's message; `--verbose` shows the request.",
    )


def probe_client_tool_stream(ctx: ProbeContext, rec: Recording) -> Outcome:
    name = smallest_tool(rec)
    if name is None:
        return Outcome("not_applicable", f"{rec.label} sends no tools.")
    body = replay_body(
        rec,
        ctx.facts.model or "",
        max_tokens=64,
        stream=True,
        tool_choice={"type": "function", "function": {"name": name}},
    )
    if ctx.facts.thinking_template:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    reply = ctx.stream("/v1/chat/completions", body)
    if not reply.ok:
        message = reply.error_message()
        fix = ctx.parser_fix() if NAMED_TOOL_ERROR in message else None
        return Outcome("fail", f"HTTP {reply.status_code}: {message}", fix=fix)
    calls, error, text = parse_tool_stream(reply.chunks)
    forced = f"(tool_choice forced to its {name!r} tool: a random model does not call tools on its own)"
    if error:
        return Outcome(
            "fail",
            f"The streamed tool call breaks {rec.client}'s parser: {error!r} {forced}.",
            fix=ctx.parser_fix(),
        )
    if not calls:
        if "<tool_call>" in text or "<function=" in text:
            return Outcome(
                "fail", f"The tool call arrives as text in content {forced}.", fix=ctx.parser_fix()
            )
        return Outcome("inconclusive", f"The stream carried no tool call {forced}.")
    call = calls[0]
    try:
        json_loads(call["arguments"])
    except ValueError:
        return Outcome(
            "inconclusive",
            f"Deltas parse (id {call['id']!r}, name {call['name']!r}) but the arguments were cut at "
            f"max_tokens {forced}.",
        )
    return Outcome(
        "pass",
        f"{len(calls)} streamed call(s) parse like {rec.client} does: {call['name']}({call['arguments']}).",
    )


def _streamed_thinking(ctx: ProbeContext) -> tuple[str | None, str, Outcome | None]:
    """Stream a short thinking-on request as the clients do: (the delta field with thoughts, content)."""
    extra = {"chat_template_kwargs": {"enable_thinking": True}} if ctx.facts.thinking_template else {}
    body = ctx.chat_body(
        [{"role": "user", "content": "What is 2+3? Think first."}], max_tokens=16, stream=True, **extra
    )
    reply = ctx.stream("/v1/chat/completions", body)
    if not reply.ok:
        return None, "", Outcome("fail", f"A streamed request answered HTTP {reply.status_code}.")
    field, content = None, ""
    for delta in reply.deltas():
        text = delta.get("content")
        content += text if isinstance(text, str) else ""
        field = field or next((f for f in REASONING_FIELDS if delta.get(f)), None)
    return field, content, None


def probe_client_thinking(ctx: ProbeContext, rec: Recording) -> Outcome:
    reads = rec.reads.reasoning
    field, content, failed = _streamed_thinking(ctx)
    if failed is not None:
        return failed
    if field is None:
        if "<think>" in content or "</think>" in content or ctx.facts.thinking_template:
            return Outcome(
                "fail",
                f"The streamed thoughts arrive inside content: {rec.client} shows (or acts on) them; the "
                "server runs without a reasoning parser.",
                fix="Start the server with --reasoning-parser "
                f"{ctx.facts.suggested_reasoning_parser or 'qwen3'}.",
            )
        return Outcome("not_applicable", "The model does not think (no reasoning in the stream).")
    if not reads:
        default = ctx.facts.thinking_default
        words = {True: "on", False: "off", None: "unknown"}[default]
        warn = bool(default)
        return Outcome(
            "warn" if warn else "pass",
            f"{rec.label} reads no reasoning field: the server's streamed `{field}` is dropped (thinking "
            f"default {words}; its tokens still count against max_tokens).",
            fix="Turn thinking off by default: restart with --default-chat-template-kwargs "
            "'{\"enable_thinking\": false}' (or `llmdeck connect --thinking off`)."
            if warn
            else None,
        )
    if field in reads:
        return Outcome(
            "pass", f"The server streams thinking in `{field}`; {rec.client} reads {', '.join(reads)}."
        )
    return Outcome(
        "fail",
        f"The server streams thinking in `{field}`, but {rec.label} reads only {', '.join(reads)}.",
        fix="Turn thinking off by default: --default-chat-template-kwargs '{\"enable_thinking\": false}'.",
    )


CLIENT_PROBES: dict[str, Callable[[ProbeContext, Recording], Outcome]] = {
    "client_context": probe_client_context,
    "client_request": probe_client_request,
    "client_tool_stream": probe_client_tool_stream,
    "client_thinking": probe_client_thinking,
    "client_output_cap": probe_client_output_cap,
    "client_own_cap": probe_client_own_cap,
}
# Claude Code counts itself when the server cannot; connect/launch set the output limit the own cap asks
OPTIONAL = {"messages_count_tokens", "client_own_cap"}


def probes_for(rec: Recording) -> dict[str, Callable[[ProbeContext, Recording], Outcome]]:
    """The client's probes: the recorded request on its own surface, then that surface's shapes."""
    from llmdeck.checks import probes_surfaces as ps

    if rec.surface == "chat":
        return CLIENT_PROBES
    common = {k: CLIENT_PROBES[k] for k in ("client_context", "client_request")}
    if rec.surface == "messages":
        surface = {
            "messages_stream": ps.probe_messages_stream,
            "messages_tools": ps.probe_messages_tools,
            "messages_thinking": ps.probe_messages_thinking,
            "messages_count_tokens": ps.probe_messages_count_tokens,
            "messages_system": ps.probe_messages_system,
        }
    else:
        surface = {"responses_stream": ps.probe_responses_stream, "responses_tools": ps.probe_responses_tools}
    caps = {"client_output_cap": probe_client_output_cap, "client_own_cap": probe_client_own_cap}
    return {**common, **surface, **caps}


def _result(ctx: ProbeContext, probe_id: str, outcome: Outcome, required: bool) -> ProbeResult:
    return ProbeResult(
        id=probe_id,
        title=TITLES[probe_id],
        status=outcome.status,
        required=required,
        summary=outcome.summary,
        fix=outcome.fix if outcome.status in {"fail", "warn"} else None,
        evidence=list(ctx.evidence),
        data=outcome.data,
    )


def client_probe_ids(client: str | None) -> list[str]:
    """The ids of ``client``'s own probes, in the order they run (none without a recording)."""
    rec = load_recording(client) if client is not None else None
    return [] if rec is None else list(probes_for(rec))


def run_client_probes(ctx: ProbeContext, only: set[str] | None = None) -> list[ProbeResult]:
    """The recorded client's probes (``only``: these of them); for a client without a recording, one
    line that says so."""
    if ctx.client is None:
        return []
    rec = load_recording(ctx.client)
    if rec is None:
        known = ", ".join(sorted(recordings()))
        ctx.evidence = []
        note = Outcome(
            "not_applicable",
            f"llmdeck has no recording of {ctx.client}'s traffic: these are the generic probes only "
            f"(recorded clients: {known}).",
        )
        return [_result(ctx, "client_traffic", note, False)]
    results: list[ProbeResult] = []
    too_big = False
    for probe_id, probe in probes_for(rec).items():
        if only is not None and probe_id not in only:
            continue
        ctx.evidence = []
        required = probe_id not in OPTIONAL and (
            probe_id not in ("client_thinking", "messages_thinking")
            or bool(rec.reads.reasoning or rec.reads.thinking)
        )
        if ctx.blocked or (ctx.stuck and not required):
            outcome = Outcome("skipped", f"Not run: {ctx.blocked or ctx.stuck}.")
        elif too_big and probe_id not in ("client_context", "client_request"):
            outcome = Outcome("skipped", f"Not run: {rec.label}'s base prompt does not fit.")
        else:
            try:
                outcome = probe(ctx, rec)
            except httpx.TimeoutException as exc:
                outcome = timed_out(ctx, exc, required)
            except httpx.HTTPError as exc:
                why = http_failure_words(exc, "the connection broke")  # `exc or ...` had printed ""
                outcome = Outcome("fail", f"The request failed: {why}.")
        if probe_id == "client_context" and outcome.status == "fail":
            too_big = not outcome.data.get("first_request_fits", True)
        results.append(_result(ctx, probe_id, outcome, required))
    return results


__all__ = ["TITLES", "TURN_TOKENS", "client_probe_ids", "run_client_probes"]
