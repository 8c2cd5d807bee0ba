"""The three request surfaces a client may speak, and a chat-completions view of each.

Claude Code speaks the Anthropic Messages API (``/v1/messages``), Codex the OpenAI Responses API
(``/v1/responses``), the others chat completions. Counting a recorded request's prompt (the
recording's Qwen3 count, or the server's ``POST /tokenize``) needs it as chat messages and
function tools, the way vLLM renders the other two surfaces through its chat template: system
blocks or ``instructions`` first, content blocks joined as text, tool calls and results kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

Surface = Literal["chat", "messages", "responses"]


def surface_of(path: str) -> Surface:
    if path.split("?")[0].rstrip("/").endswith("/messages"):
        return "messages"
    if "/responses" in path:
        return "responses"
    return "chat"


def _text(content: Any) -> str:
    """Anthropic/Responses content (a string or a list of blocks) as plain text."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif block.get("type") == "tool_result":
                parts.append(_text(block.get("content")))
    return "\n".join(parts)


def _messages_view(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    msgs: list[dict[str, Any]] = []
    system = _text(body.get("system"))
    if system:
        msgs.append({"role": "system", "content": system})
    for m in body.get("messages") or []:
        content = m.get("content")
        calls = [b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
        entry: dict[str, Any] = {"role": m.get("role", "user"), "content": _text(content)}
        if calls:
            entry["tool_calls"] = [
                {"type": "function", "function": {"name": c.get("name"), "arguments": c.get("input") or {}}}
                for c in calls
            ]
        msgs.append(entry)
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {},
            },
        }
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("name")
    ]
    return msgs, tools


def _responses_view(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    msgs: list[dict[str, Any]] = []
    if body.get("instructions"):
        msgs.append({"role": "system", "content": str(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role", "user")
            msgs.append({"role": role, "content": _text(item.get("content"))})
        elif kind == "function_call":
            args = item.get("arguments") or "{}"
            call = {
                "name": item.get("name"),
                "arguments": json.loads(args) if isinstance(args, str) else args,
            }
            msgs.append(
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]}
            )
        elif kind == "function_call_output":
            msgs.append({"role": "tool", "content": _text(item.get("output"))})
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get("parameters") or {},
            },
        }
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("type") == "function" and t.get("name")
    ]
    return msgs, tools


def chat_view(path: str, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(chat messages, function tools) of a request on any surface."""
    kind = surface_of(path)
    if kind == "messages":
        return _messages_view(body)
    if kind == "responses":
        return _responses_view(body)
    return list(body.get("messages") or []), list(body.get("tools") or [])


def tool_names(path: str, body: dict[str, Any]) -> list[str]:
    return [str(t["function"]["name"]) for t in chat_view(path, body)[1]]


def requested_output(path: str, body: dict[str, Any]) -> int | None:
    """The output the client asks for: max_tokens (chat, Messages) or max_output_tokens (Responses)."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def chunk_deltas(chunks: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every streamed chat chunk's ``choices[].delta`` that is an object (a chunk of another shape
    carries no delta a client could read)."""
    for chunk in chunks:
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                yield delta
