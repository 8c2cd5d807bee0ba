"""The probes of `llmdeck check`: each asks the server one question and keeps the evidence.

A random-weight model cannot be trusted to write a tool call or a thought, so every probe keeps
what the *server* supports (it accepted the request, its parsers split the output, its template
honours a switch) apart from what the *model* did ("inconclusive: the model's output is not a
tool call").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmdeck.checks.clients import AGENT_CLIENTS, required_probes, suggest_parsers
from llmdeck.checks.http import DeadlinePassed, Http, Reply
from llmdeck.checks.report import Exchange, ProbeResult, ServerFacts, Status
from llmdeck.errors import EndpointError

# vLLM's own words (vllm/entrypoints/openai/.../online_renderer.py, v0.22-v0.32).
AUTO_TOOL_ERROR = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
NAMED_TOOL_ERROR = "requires --tool-call-parser to be set"
REASONING_FIELDS = ("reasoning", "reasoning_content")

TITLES: dict[str, str] = {
    "health": "health endpoint",
    "api_key": "API key header",
    "models": "/v1/models and max_model_len",
    "chat": "chat completion",
    "completions": "text completion",
    "streaming_usage": "streaming with usage",
    "reasoning_split": "reasoning split (reasoning vs content)",
    "thinking_control": "thinking off per request (chat_template_kwargs)",
    "thinking_default": "server thinking default",
    "content_null_trap": "content: null + finish_reason: length trap",
    "tool_auto": "tool call, tool_choice auto",
    "tool_named": "tool call, named tool_choice",
    "tool_parallel": "parallel tool calls",
    "tool_result": "tool result sent back (role: tool)",
    "long_context": "long context near max_model_len",
}
PROBE_ORDER: tuple[str, ...] = tuple(TITLES)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "enum": ["UTC", "JST"]}},
                "required": ["zone"],
            },
        },
    },
]
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOLS)


@dataclass
class Outcome:
    status: Status
    summary: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbeContext:
    http: Http
    facts: ServerFacts
    client: str | None
    requested_model: str | None
    long_context_tokens: int | None = None
    long_context_timeout: float = 600.0
    evidence: list[Exchange] = field(default_factory=list)
    blocked: str | None = None  # set when nothing more can be asked (e.g. 401 without a key)
    incomplete: str | None = None  # set when the check's deadline passed
    template_evidence: list[Exchange] = field(default_factory=list)  # the /tokenize renders

    # -- request helpers that record evidence ------------------------------------------------
    def get(self, path: str, **kw: Any) -> Reply:
        reply = self.http.request("GET", path, **kw)
        self.evidence.append(reply.exchange)
        return reply

    def post(self, path: str, body: Any, **kw: Any) -> Reply:
        reply = self.http.request("POST", path, body, **kw)
        self.evidence.append(reply.exchange)
        return reply

    def stream(self, path: str, body: Any) -> Reply:
        reply = self.http.stream(path, body)
        self.evidence.append(reply.exchange)
        return reply

    def chat_body(self, messages: list[dict[str, Any]], max_tokens: int = 16, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.facts.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        body.update({k: v for k, v in extra.items() if v is not None})
        return body

    def no_thinking(self) -> dict[str, Any] | None:
        """chat_template_kwargs that turn thinking off, when the template has the switch."""
        return {"enable_thinking": False} if self.facts.thinking_template else None

    def parser_fix(self) -> str:
        tool = self.facts.suggested_tool_parser
        parser = tool or "<parser for your model, see vLLM's tool calling docs>"
        return f"Start the server with --enable-auto-tool-choice --tool-call-parser {parser}."


# -- helpers ---------------------------------------------------------------------------------------


def _message(reply: Reply) -> dict[str, Any]:
    try:
        msg = reply.data["choices"][0]["message"]
        return msg if isinstance(msg, dict) else {}
    except (KeyError, IndexError, TypeError):
        return {}


def _finish(reply: Reply) -> str | None:
    try:
        value = reply.data["choices"][0].get("finish_reason")
        return str(value) if value is not None else None
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


def _reasoning(msg: dict[str, Any]) -> tuple[str | None, str]:
    for name in REASONING_FIELDS:
        value = msg.get(name)
        if isinstance(value, str) and value:
            return name, value
    return None, ""


def _content(msg: dict[str, Any]) -> str | None:
    value = msg.get("content")
    return value if isinstance(value, str) else None


def _http_fail(reply: Reply, what: str) -> Outcome:
    return Outcome(
        "fail",
        f"{what} answered HTTP {reply.status_code}: {reply.error_message()}",
        data={"status_code": reply.status_code},
    )


def _tool_calls(msg: dict[str, Any]) -> list[dict[str, Any]]:
    calls = msg.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _valid_call(call: dict[str, Any]) -> bool:
    fn = call.get("function") or {}
    if fn.get("name") not in TOOL_NAMES:
        return False
    try:
        args = json.loads(fn.get("arguments") or "")
    except (TypeError, ValueError):
        return False
    return isinstance(args, dict)


def _looks_like_text_tool_call(text: str | None) -> bool:
    return bool(text) and any(m in str(text) for m in ("<tool_call>", "<function=", '"arguments"'))


# -- probes ----------------------------------------------------------------------------------------


def probe_health(ctx: ProbeContext) -> Outcome:
    reply = ctx.get("/health", api_key=False, timeout=min(10.0, ctx.http.timeout))
    try:
        version: Reply | None = ctx.http.request(
            "GET", "/version", api_key=False, timeout=min(10.0, ctx.http.timeout)
        )
    except httpx.HTTPError:
        version = None
    if version is not None and version.ok and isinstance(version.data, dict) and version.data.get("version"):
        ctx.facts.server_version = str(version.data["version"])
        ctx.evidence.append(version.exchange)
    if reply.ok:
        where = f" (vLLM {ctx.facts.server_version})" if ctx.facts.server_version else ""
        return Outcome("pass", f"GET /health answered {reply.status_code}{where}.")
    return Outcome(
        "fail",
        f"GET /health answered HTTP {reply.status_code}: the server is up but not healthy (still loading, "
        "or its engine died).",
        fix="Wait for `Application startup complete.` in the server log, or read the log for the error "
        "(`llmdeck logs <name>`).",
    )


def probe_api_key(ctx: ProbeContext) -> Outcome:
    bare = ctx.get("/v1/models", api_key=False)
    if bare.ok:
        ctx.facts.api_key_required = False
        if ctx.http.api_key:
            return Outcome("pass", "The server needs no API key; the key you gave is accepted and ignored.")
        return Outcome("pass", "The server needs no API key (clients may send any placeholder key).")
    if bare.status_code not in (401, 403):
        return _http_fail(bare, "GET /v1/models")
    ctx.facts.api_key_required = True
    if not ctx.http.api_key:
        ctx.blocked = "the server wants an API key and none was given"
        return Outcome(
            "fail",
            "The server answers 401 Unauthorized without an API key (it was started with --api-key).",
            fix="Pass the key: `llmdeck check --api-key KEY` or set LLMDECK_API_KEY; configure the same "
            "key in your client (`llmdeck connect` writes it).",
        )
    keyed = ctx.get("/v1/models")
    if keyed.ok:
        return Outcome("pass", "The server requires an API key (401 without it) and accepts yours.")
    ctx.blocked = "the server rejected the API key"
    return Outcome(
        "fail",
        f"The server rejects the given API key (HTTP {keyed.status_code}).",
        fix="Use the key the server was started with (--api-key / VLLM_API_KEY).",
    )


def probe_models(ctx: ProbeContext) -> Outcome:
    reply = ctx.get("/v1/models")
    if not reply.ok:
        return _http_fail(reply, "GET /v1/models")
    entries = reply.data.get("data") if isinstance(reply.data, dict) else None
    if not isinstance(entries, list) or not entries:
        return Outcome("fail", "GET /v1/models returned no models.", fix="Check the server's --model.")
    ids = [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]]
    if not ids:
        return Outcome(
            "fail",
            f"GET /v1/models lists entries without a string id: {str(entries)[:200]!r}.",
            fix="Point the check at an OpenAI-compatible server (e.g. vLLM); its models carry an id.",
        )
    ctx.facts.models = ids
    wanted = ctx.requested_model or ctx.facts.model
    if ctx.requested_model and ctx.requested_model not in ids:
        ctx.facts.model = ids[0]
        return Outcome(
            "fail",
            f"The server does not serve {ctx.requested_model!r}; it serves {', '.join(ids)}.",
            fix=f"Use --model {ids[0]} (requests must name the --served-model-name), or restart the "
            f"server with --served-model-name {ctx.requested_model}.",
        )
    chosen = wanted if wanted in ids else ids[0]
    entry = next(e for e in entries if isinstance(e, dict) and e.get("id") == chosen)
    ctx.facts.model = chosen
    ctx.facts.model_root = str(entry.get("root")) if entry.get("root") else None
    mml = entry.get("max_model_len")
    ctx.facts.max_model_len = int(mml) if isinstance(mml, int) else None
    tool, reasoning = suggest_parsers(chosen, ctx.facts.model_root)
    ctx.facts.suggested_tool_parser = tool
    ctx.facts.suggested_reasoning_parser = reasoning
    length = f"max_model_len {ctx.facts.max_model_len}" if ctx.facts.max_model_len else "no max_model_len"
    return Outcome(
        "pass",
        f"Serves {chosen!r} ({length}).",
        data={"models": ids, "max_model_len": ctx.facts.max_model_len, "root": ctx.facts.model_root},
    )


def probe_chat(ctx: ProbeContext) -> Outcome:
    reply = ctx.post("/v1/chat/completions", ctx.chat_body([{"role": "user", "content": "Say hello."}]))
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions")
    msg = _message(reply)
    if not msg:
        return Outcome("fail", "The chat reply has no choices[0].message.")
    content = _content(msg)
    _, reasoning = _reasoning(msg)
    usage = reply.data.get("usage") or {}
    return Outcome(
        "pass",
        f"Answered: {len(content or '')} chars of content, {len(reasoning)} of reasoning, finish_reason "
        f"{_finish(reply)}, {usage.get('completion_tokens')} tokens.",
    )


def probe_completions(ctx: ProbeContext) -> Outcome:
    body = {"model": ctx.facts.model, "prompt": "def fibonacci(n):", "max_tokens": 8, "temperature": 0}
    reply = ctx.post("/v1/completions", body)
    if not reply.ok:
        return _http_fail(reply, "POST /v1/completions")
    try:
        text = reply.data["choices"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return Outcome("fail", "The completion reply has no choices[0].text.")
    return Outcome("pass", f"Answered {len(str(text))} chars, finish_reason {_finish(reply)}.")


def probe_streaming_usage(ctx: ProbeContext) -> Outcome:
    body = ctx.chat_body(
        [{"role": "user", "content": "Count to five."}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    reply = ctx.stream("/v1/chat/completions", body)
    if not reply.ok:
        return _http_fail(reply, "streaming POST /v1/chat/completions")
    deltas = 0
    for chunk in reply.chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content") or any(delta.get(f) for f in REASONING_FIELDS) or delta.get("tool_calls"):
                deltas += 1
    usage = next((c["usage"] for c in reversed(reply.chunks) if c.get("usage")), None)
    data = {"chunks": len(reply.chunks), "content_chunks": deltas, "usage": usage, "done": reply.done}
    if not reply.done:
        return Outcome(
            "fail",
            "The stream ended without `data: [DONE]`.",
            fix="Check a proxy between client and server.",
            data=data,
        )
    if not usage or usage.get("completion_tokens") is None:
        return Outcome(
            "fail",
            "The stream carried no usage chunk although stream_options.include_usage was true.",
            fix="Upgrade vLLM, or remove a proxy that strips the final usage chunk.",
            data=data,
        )
    if deltas == 0:
        return Outcome("fail", "The stream carried no generated text.", data=data)
    return Outcome(
        "pass",
        f"{len(reply.chunks)} chunks, {deltas} with text, usage {usage.get('completion_tokens')} completion "
        "tokens, then [DONE].",
        data=data,
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
    """
    saved, ctx.evidence = ctx.evidence, []
    default = _tokenize(ctx, None)
    on = _tokenize(ctx, {"enable_thinking": True})
    off = _tokenize(ctx, {"enable_thinking": False})
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


PROBES: dict[str, Callable[[ProbeContext], Outcome]] = {
    "health": probe_health,
    "api_key": probe_api_key,
    "models": probe_models,
    "chat": probe_chat,
    "completions": probe_completions,
    "streaming_usage": probe_streaming_usage,
    "reasoning_split": probe_reasoning_split,
    "thinking_control": probe_thinking_control,
    "thinking_default": probe_thinking_default,
    "content_null_trap": probe_content_null_trap,
    "tool_auto": probe_tool_auto,
    "tool_named": probe_tool_named,
    "tool_parallel": probe_tool_parallel,
    "tool_result": probe_tool_result,
    "long_context": probe_long_context,
}


def _ensure_answering(ctx: ProbeContext, probe_id: str, limit: float = 10.0) -> None:
    """After a timeout: is the server silent? Then stop the check now (exit 1), not probe by probe."""
    if probe_id != "health":
        try:
            ctx.http.request("GET", "/health", api_key=False, timeout=limit)
            return
        except httpx.TimeoutException:
            pass
        except (httpx.HTTPError, DeadlinePassed):
            return
    raise EndpointError(
        f"The server at {ctx.http.base_url} accepted the connection but is not answering (no reply "
        f"to GET /health within {min(limit, ctx.http.timeout):g} s).",
        hint="Check that it finished loading and is not stuck (`llmdeck logs`); a vLLM server answers "
        "/health as soon as it is up.",
    )


def run_probe(ctx: ProbeContext, probe_id: str) -> ProbeResult:
    required = probe_id in required_probes(ctx.client)
    ctx.evidence = []
    if ctx.blocked and probe_id not in {"health", "api_key"}:
        outcome = Outcome("skipped", f"Not run: {ctx.blocked}.")
    else:
        try:
            outcome = PROBES[probe_id](ctx)
        except httpx.TimeoutException as exc:
            _ensure_answering(ctx, probe_id)
            outcome = Outcome("inconclusive", f"The request timed out ({exc or type(exc).__name__}).")
        except DeadlinePassed as exc:
            ctx.blocked = ctx.incomplete = exc.message.rstrip(".")
            outcome = Outcome("inconclusive", exc.message)
        except httpx.HTTPError as exc:
            outcome = Outcome("fail", f"The request failed: {type(exc).__name__}: {exc}")
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
