"""The shared parts of the probes of `llmdeck check`: the context, the outcome, the reply helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmdeck.checks.http import Http, Reply
from llmdeck.checks.results import Exchange, ServerFacts, Status
from llmdeck.util.jsonsafe import loads as json_loads

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


STUCK_HINT = (
    "Check that the engine is not stuck or saturated (`llmdeck logs`, `llmdeck status`); if it is only "
    "slow, raise --timeout."
)


# Short plain generations: one that gets no reply means the engine is stuck or saturated, and every
# later probe would wait its whole --timeout the same way (a check --client claude-code had waited 14
# times, 15 minutes by default).
STUCK_PROBES = frozenset({"chat", "completions", "streaming_usage"})


def timed_out(ctx: ProbeContext, exc: Exception, required: bool, probe_id: str = "") -> Outcome:
    """A probe's request got no reply in time while the server still answers /health. For a probe the
    client needs it is a failure (the client would wait the same way) and the probes after it are not
    run, each to wait again; for another, inconclusive (and the last probe run where the caller chose
    its probes: ``stop_on_timeout``; after a short generation, ``stuck``: only the probes the client
    needs are still run, the first of them to fail the same way or to show the server recovered)."""
    if (passed := ctx.http.deadline_passed()) is not None:  # cut by --deadline, not by --timeout
        ctx.blocked = ctx.incomplete = passed
        return Outcome("inconclusive", passed + ".", data={"timed_out": True})
    why = f"The request timed out ({str(exc).strip() or 'no reply in time'})"
    limit = ctx.http.timeout
    if required or ctx.stop_on_timeout:  # the next request would wait the same way
        ctx.blocked = f"the server did not answer a request within {limit:g} s"
    elif probe_id in STUCK_PROBES:  # only the client's own next probe is asked (it fails or passes)
        ctx.stuck = f"a {probe_id} request got no reply within {limit:g} s"
    if not required:
        return Outcome("inconclusive", why + ".", data={"timed_out": True})
    return Outcome(
        "fail",
        f"{why}: the server answers /health but gave this request no reply within {limit:g} s, so "
        "the client would wait too.",
        fix=STUCK_HINT,
        data={"timed_out": True},
    )


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
    stop_on_timeout: bool = False  # a timed-out request ends the run (connect's few chosen probes)
    stuck: str | None = None  # a short generation got no reply: only probes the client needs still run
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

    def stream(self, path: str, body: Any, first_only: bool = False) -> Reply:
        reply = self.http.stream(path, body, first_only=True) if first_only else self.http.stream(path, body)
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


def _not_a_completion(reply: Reply, what: str) -> Outcome | None:
    """A 2xx reply without ``choices[0].message``: no chat completion, so nothing it holds can pass."""
    if _message(reply):
        return None
    return Outcome(
        "fail",
        f"{what} answered HTTP {reply.status_code} with no chat completion (no choices[0].message): "
        f"{reply.text[:120]!r}.",
        fix="Point at an OpenAI-compatible server (vLLM); a proxy in between may rewrite its replies.",
    )


def _tool_calls(msg: dict[str, Any]) -> list[dict[str, Any]]:
    calls = msg.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _valid_call(call: dict[str, Any]) -> bool:
    fn = call.get("function")
    if not isinstance(fn, dict) or fn.get("name") not in TOOL_NAMES:
        return False
    try:
        args = json_loads(fn.get("arguments") or "")
    except (TypeError, ValueError):
        return False
    return isinstance(args, dict)


def _looks_like_text_tool_call(text: str | None) -> bool:
    return bool(text) and any(m in str(text) for m in ("<tool_call>", "<function=", '"arguments"'))
