"""Claude Code driven headless: ``claude -p --output-format stream-json --verbose
--include-partial-messages --dangerously-skip-permissions -- PROMPT`` in the scratch workspace; follow-ups
``--resume SESSION``.

It reads the server from its environment (the Anthropic Messages API at the server's root:
``POST /v1/messages?beta=true``; 2.1.197 sent a ``HEAD /`` first, 2.1.332 does not):
``ANTHROPIC_BASE_URL``, ``ANTHROPIC_AUTH_TOKEN`` (sent as a bearer token), the served model as its main,
small/fast and every tier's model (its background requests go there too), the server's window and a
reply cap (``CLAUDE_CODE_MAX_CONTEXT_TOKENS``, ``CLAUDE_CODE_MAX_OUTPUT_TOKENS``) and
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``: with those, 2.1.197 and 2.1.332 connect to no other
host (checked with strace: no DNS lookup, only the server's port). As
root it refuses to skip permissions unless ``IS_SANDBOX=1``: the scratch folder is that sandbox.

Its events (one JSON object a line, learnt from real runs on the CPU engine): ``system``/``init``
(``session_id``); ``stream_event`` wrapping the Messages stream — ``message_start`` (the request's
input tokens), ``content_block_start`` (a ``tool_use`` names its tool), ``message_delta`` (stop reason,
output tokens), ``message_stop`` (one model request: a turn); ``assistant`` (each finished content
block: ``text``, ``thinking``, ``tool_use`` with its input; ``model: <synthetic>`` with an ``error``
when the request failed); ``user`` (``tool_result`` blocks); ``system``/``api_retry`` (``error_status``
401 when the key is refused); ``system``/``thinking_tokens`` (estimates, skipped); ``result`` (the
prompt's end: ``is_error``, ``api_error_status``, the final text, total usage).
"""

from __future__ import annotations

import json
import os
from typing import Any

from llmdeck.evals.agentbase import (
    AgentSetup,
    StreamState,
    clip,
    end_turn,
    event_of,
    note,
    num,
    obj,
    status_in,
    unreached,
    unreached_by_status,
)
from llmdeck.evals.results import TokenCounts, TurnRecord

VERSION = "2.1.332"
MAX_RETRIES = 3  # its default is 10 with backoff to ~40 s: three minutes before a refused key shows
NO_KEY = "llmdeck-no-key"  # it will not start without a credential; a server without --api-key ignores it


def env(setup: AgentSetup) -> dict[str, str]:
    model = setup.model
    out = {
        "ANTHROPIC_BASE_URL": setup.base_url,
        "ANTHROPIC_AUTH_TOKEN": setup.api_key or NO_KEY,
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(MAX_RETRIES),
    }
    if setup.max_model_len and setup.reply_limit:
        # without them it takes an unknown model's window as 1M tokens (2.1.332; 200K in 2.1.197) and
        # never compacts before the server refuses, and asks 32000 tokens for every reply
        out["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] = str(setup.max_model_len)
        out["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(setup.reply_limit)
    if hasattr(os, "getuid") and os.getuid() == 0:
        out["IS_SANDBOX"] = "1"
    return out


def argv(setup: AgentSetup, prompt: str, session: str | None) -> list[str]:
    out = [
        str(setup.binary), "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
        "--dangerously-skip-permissions",
    ]  # fmt: skip
    if session:
        out += ["--resume", session]
    return [*out, "--", prompt]


def _usage(raw: Any) -> TokenCounts:
    u = obj(raw)
    return TokenCounts(
        input=num(u.get("input_tokens")),
        output=num(u.get("output_tokens")),
        cache_read=num(u.get("cache_read_input_tokens")),
        cache_write=num(u.get("cache_creation_input_tokens")),
    )


def _stream(state: StreamState, ev: dict[str, Any], t: float) -> TurnRecord | None:
    kind, sc = ev.get("type"), state.scratch
    if kind == "message_start":
        sc["usage"] = _usage(obj(ev.get("message")).get("usage"))
        sc["reason"] = None
    elif kind == "content_block_start":
        block = obj(ev.get("content_block"))
        if block.get("type") == "tool_use":
            state.pending_tools.append(str(block.get("name") or "?"))
    elif kind == "message_delta":
        usage: TokenCounts = sc.get("usage") or TokenCounts()
        delta = _usage(ev.get("usage"))
        usage.output = delta.output or usage.output
        usage.input = delta.input or usage.input
        sc["usage"], sc["reason"] = usage, obj(ev.get("delta")).get("stop_reason")
    elif kind == "message_stop":
        return end_turn(state, t, sc.pop("reason", None), sc.pop("usage", None) or TokenCounts())
    return None


def _assistant(state: StreamState, ev: dict[str, Any], t: float) -> None:
    msg = obj(ev.get("message"))
    blocks = [obj(b) for b in msg.get("content") or [] if isinstance(b, dict)]
    if msg.get("model") == "<synthetic>" or ev.get("error"):  # Claude Code's own words: the request failed
        text = " ".join(str(b.get("text") or "") for b in blocks).strip()
        note(state, t, "error", f"{ev.get('error') or 'error'}: {text}")
        _classify(state, None, text)
        return
    tools: dict[str, int] = state.scratch.setdefault("tools", {})
    for b in blocks:
        if b.get("type") == "text" and b.get("text"):
            note(state, t, "text", str(b["text"]))
        elif b.get("type") == "thinking" and b.get("thinking"):
            note(state, t, "reasoning", str(b["thinking"]))
        elif b.get("type") == "tool_use":
            note(state, t, "tool", json.dumps(b.get("input"), ensure_ascii=False), tool=str(b.get("name")))
            tools[str(b.get("id"))] = len(state.run.transcript) - 1


def _tool_results(state: StreamState, ev: dict[str, Any]) -> None:
    tools: dict[str, int] = state.scratch.get("tools", {})
    for b in obj(ev.get("message")).get("content") or []:
        b = obj(b)
        at = tools.get(str(b.get("tool_use_id")))
        if b.get("type") != "tool_result" or at is None:
            continue
        content = b.get("content")
        if isinstance(content, list):
            content = "\n".join(str(obj(c).get("text") or "") for c in content)
        entry = state.run.transcript[at]
        entry.status = "error" if b.get("is_error") else "completed"
        entry.text = clip(f"{entry.text}\n→ {content}")


def _classify(state: StreamState, status: int | None, text: str) -> None:
    """Claude Code's message for a request that failed for good (``API Error: 401 …``)."""
    status = status or status_in(text.split("\n", 1)[0])
    if unreached_by_status(state, status, text):
        return
    if "Unable to connect to API" in text or "ConnectionRefused" in text:
        unreached(state, "connection", None, text)
    elif text.startswith(("Failed to authenticate", "Invalid API key")):
        unreached(state, "auth", status, text)
    elif text.startswith("There's an issue with the selected model"):  # what it says for a 404
        unreached(state, "not_found", status or 404, text)


def _system(state: StreamState, ev: dict[str, Any], t: float) -> None:
    sub = ev.get("subtype")
    if sub == "api_retry":
        status = ev.get("error_status") if isinstance(ev.get("error_status"), int) else None
        what = (
            f"retry {ev.get('attempt')}/{ev.get('max_retries')}: {ev.get('error')} ({status or 'no status'})"
        )
        note(state, t, "error", what)
        unreached_by_status(state, status, what)


def feed(state: StreamState, line: str, t: float) -> TurnRecord | None:
    """One line of ``claude -p --output-format stream-json``; returns the turn a ``message_stop`` ended."""
    ev = event_of(state, line, t)
    if ev is None:
        return None
    kind = ev.get("type")
    if isinstance(ev.get("session_id"), str):
        state.run.session_id = ev["session_id"]
    if kind == "stream_event":
        return _stream(state, obj(ev.get("event")), t)
    if kind == "assistant":
        _assistant(state, ev, t)
    elif kind == "user":
        _tool_results(state, ev)
    elif kind == "system":
        _system(state, ev, t)
    elif kind == "result" and ev.get("is_error"):
        text = str(ev.get("result") or "")
        last = state.run.transcript[-1] if state.run.transcript else None
        if last is None or last.kind != "error" or text not in last.text:
            note(state, t, "error", text)
        status = ev.get("api_error_status") if isinstance(ev.get("api_error_status"), int) else None
        _classify(state, status, text)
    return None
