"""Codex driven headless: ``codex exec --json --dangerously-bypass-approvals-and-sandbox
--skip-git-repo-check -C WORKSPACE -- PROMPT``; follow-ups ``codex exec resume --json … THREAD -- PROMPT``.

Its configuration is ``$CODEX_HOME/config.toml`` in the scratch home (never the user's ``~/.codex``): one
model provider at the server's ``/v1`` with ``wire_api = "responses"`` (codex speaks only the Responses
API: ``POST /v1/responses``, streamed, ``store: false``, the whole history resent each request), the key
(if any) from an environment variable, and what stops 0.171.0 calling other hosts — checked with strace:
``features.plugins = false`` (else it clones github.com/openai/plugins.git and asks api.github.com) and
``analytics.enabled = false`` (else it resolves chatgpt.com). No sandbox: the eval's scratch folder is
the agent's, as for the other clients (its own sandbox fails in many containers).

Its events (``--json``, one object a line, learnt from real runs): ``thread.started`` (``thread_id``: the
session), ``turn.started``, ``item.started`` / ``item.completed`` (``agent_message``, ``reasoning``,
``command_execution`` with its command, output and exit code, ``file_change``, ``mcp_tool_call``,
``web_search``, ``todo_list``, ``error``), ``error`` (``Reconnecting... 1/5 (unexpected status 401
Unauthorized: …)``, ``Reconnecting... waiting for network (Connection failed: …)`` — that one forever),
``turn.failed`` and ``turn.completed`` with the prompt's usage summed over its requests
(``input_tokens``, ``cached_input_tokens``, ``output_tokens``, ``reasoning_output_tokens``). A codex
"turn" is one prompt: llmdeck's turns are its tool calls and that end, so --max-turns counts tool calls
and --max-tokens is checked at each prompt's end (codex says nothing of tokens before).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmdeck.evals.agentbase import (
    AgentSetup,
    StreamState,
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

VERSION = "0.171.0"
PROVIDER = "llmdeck"
KEY_ENV = "LLMDECK_EVAL_API_KEY"
TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call")


def codex_home(setup: AgentSetup) -> Path:
    return setup.home / ".codex"


def config_text(setup: AgentSetup) -> str:
    """The smallest config.toml that runs codex against the server, offline."""
    q = json.dumps  # a JSON string is a TOML basic string
    lines = [
        "# written by llmdeck eval for its scratch home",
        f"model = {q(setup.model)}",
        f"model_provider = {q(PROVIDER)}",
        "check_for_update_on_startup = false",
    ]
    if setup.max_model_len:
        lines.append(f"model_context_window = {int(setup.max_model_len)}")
    lines += ["", "[analytics]", "enabled = false", "", "[features]", "plugins = false", ""]
    lines += [
        f"[model_providers.{PROVIDER}]",
        'name = "llmdeck"',
        f"base_url = {q(setup.base_url.rstrip('/') + '/v1')}",
        'wire_api = "responses"',
    ]
    if setup.api_key:
        lines.append(f"env_key = {q(KEY_ENV)}")
    return "\n".join(lines) + "\n"


def write_config(setup: AgentSetup) -> None:
    path = codex_home(setup) / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(setup), encoding="utf-8")


def env(setup: AgentSetup) -> dict[str, str]:
    out = {"CODEX_HOME": str(codex_home(setup))}
    if setup.api_key:
        out[KEY_ENV] = setup.api_key
    return out


def argv(setup: AgentSetup, prompt: str, session: str | None) -> list[str]:
    flags = ["--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]
    if session:
        return [str(setup.binary), "exec", "resume", *flags, session, "--", prompt]
    return [str(setup.binary), "exec", *flags, "-C", str(setup.workspace), "--", prompt]


def _usage(raw: Any) -> TokenCounts:
    u = obj(raw)
    reasoning = num(u.get("reasoning_output_tokens"))
    return TokenCounts(
        input=num(u.get("input_tokens")),
        output=max(0, num(u.get("output_tokens")) - reasoning),  # output_tokens counts the reasoning too
        reasoning=reasoning,
        cache_read=num(u.get("cached_input_tokens")),
        cache_write=num(u.get("cache_write_input_tokens")),
    )


def _tool_text(item: dict[str, Any]) -> tuple[str, str]:
    kind = str(item.get("type"))
    if kind == "command_execution":
        out = item.get("aggregated_output") or ""
        code = item.get("exit_code")
        return "shell", f"{item.get('command', '')}\n→ {out}" + (f"(exit {code})" if code else "")
    if kind == "file_change":
        changes = [f"{obj(c).get('kind', '?')} {obj(c).get('path', '?')}" for c in item.get("changes") or []]
        return "file_change", "\n".join(changes)
    if kind == "mcp_tool_call":
        name = f"{item.get('server', '?')}.{item.get('tool', '?')}"
        return name, json.dumps(
            {k: item.get(k) for k in ("arguments", "result", "error")}, ensure_ascii=False
        )
    if kind == "web_search":
        return "web_search", str(item.get("query") or "")
    return kind, json.dumps(item, ensure_ascii=False)


def _item(state: StreamState, item: dict[str, Any], t: float) -> TurnRecord | None:
    kind = item.get("type")
    if kind == "agent_message" and item.get("text"):
        note(state, t, "text", str(item["text"]))
    elif kind == "reasoning" and item.get("text"):
        note(state, t, "reasoning", str(item["text"]))
    elif kind == "error":
        note(state, t, "error", str(item.get("message") or ""))
    elif kind == "todo_list":
        note(state, t, "text", "\n".join(str(obj(i).get("text") or "") for i in item.get("items") or []))
    elif kind in TOOL_ITEMS:
        name, text = _tool_text(item)
        note(state, t, "tool", text, tool=name, status=str(item.get("status") or "") or None)
        state.pending_tools.append(name)
        return end_turn(state, t, "tool-calls", TokenCounts())  # the model asked for it: a request ended
    return None


def _error(state: StreamState, message: str, t: float) -> None:
    note(state, t, "error", message)
    if unreached_by_status(state, status_in(message), message):
        return
    if "Connection failed" in message or "error sending request" in message:
        unreached(state, "connection", None, message)


def feed(state: StreamState, line: str, t: float) -> TurnRecord | None:
    """One line of ``codex exec --json``; returns the turn a tool call or ``turn.completed`` ended."""
    ev = event_of(state, line, t)
    if ev is None:
        return None
    kind = ev.get("type")
    if kind == "thread.started" and isinstance(ev.get("thread_id"), str):
        state.run.session_id = ev["thread_id"]
    elif kind == "item.completed":
        return _item(state, obj(ev.get("item")), t)
    elif kind == "error":
        _error(state, str(ev.get("message") or ""), t)
    elif kind == "turn.failed":
        _error(state, str(obj(ev.get("error")).get("message") or "turn failed"), t)
    elif kind == "turn.completed":
        return end_turn(state, t, "stop", _usage(ev.get("usage")))
    return None
