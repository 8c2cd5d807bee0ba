"""Streams of the Messages and Responses APIs, read the way Claude Code and Codex read them.

Claude Code (the Anthropic SDK): ``message_start`` (usage.input_tokens), content blocks of type
text / thinking / tool_use with ``text_delta`` / ``thinking_delta`` / ``input_json_delta`` (the
tool input JSON-parsed at ``content_block_stop``), ``message_delta`` (stop_reason, output tokens),
``message_stop``. Codex: ``response.output_text.delta``, function_call items from
``response.output_item.done``, and the turn ends only at ``response.completed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmdeck.util.jsonsafe import loads as json_loads


@dataclass
class MessagesStream:
    text: str = ""
    thinking: str = ""
    tool_uses: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    stopped: bool = False
    error: str | None = None  # the stream's shape breaks the client's parser (the server's fault)
    bad_input: str | None = None  # a tool_use input that is no JSON object (what the model wrote)


def parse_messages_stream(chunks: list[dict[str, Any]]) -> MessagesStream:
    got = MessagesStream()
    blocks: dict[int, dict[str, Any]] = {}
    for ev in chunks:
        kind = ev.get("type")
        if kind == "message_start":
            usage = (ev.get("message") or {}).get("usage") or {}
            got.input_tokens = usage.get("input_tokens")
        elif kind == "content_block_start":
            blocks[int(ev.get("index", len(blocks)))] = {**(ev.get("content_block") or {}), "partial": ""}
        elif kind == "content_block_delta":
            block = blocks.get(int(ev.get("index", -1)))
            delta = ev.get("delta") or {}
            if block is None:
                got.error = "a content_block_delta without its content_block_start"
                return got
            got.text += delta.get("text") or ""
            got.thinking += delta.get("thinking") or ""
            block["partial"] += delta.get("partial_json") or ""
        elif kind == "content_block_stop":
            block = blocks.get(int(ev.get("index", -1))) or {}
            if block.get("type") == "tool_use":
                try:
                    raw = block["partial"] or "{}"
                    tool_input = json_loads(raw) if block["partial"] else block.get("input") or {}
                except ValueError:  # read on: a stop_reason max_tokens says it was cut
                    got.bad_input = f"tool_use input is not JSON: {raw[:80]!r}"
                    continue
                if not isinstance(tool_input, dict):
                    got.bad_input = f"tool_use input is not a JSON object: {raw[:80]!r}"
                    continue
                got.tool_uses.append({"id": block.get("id"), "name": block.get("name"), "input": tool_input})
        elif kind == "message_delta":
            got.stop_reason = (ev.get("delta") or {}).get("stop_reason")
            got.output_tokens = (ev.get("usage") or {}).get("output_tokens")
        elif kind == "message_stop":
            got.stopped = True
        elif kind == "error":
            got.error = str((ev.get("error") or {}).get("message") or ev)
    return got


@dataclass
class ResponsesStream:
    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    completed: bool = False
    usage: dict[str, Any] | None = None
    incomplete_reason: str | None = None


def parse_responses_stream(chunks: list[dict[str, Any]]) -> ResponsesStream:
    got = ResponsesStream()
    for ev in chunks:
        kind = ev.get("type")
        if kind == "response.output_text.delta":
            got.text += ev.get("delta") or ""
        elif kind == "response.output_item.done":
            item = ev.get("item") or {}
            if item.get("type") == "function_call":
                got.calls.append(item)
        elif kind in ("response.completed", "response.incomplete"):
            response = ev.get("response") or {}
            got.completed = True
            got.usage = response.get("usage")
            got.incomplete_reason = (response.get("incomplete_details") or {}).get("reason")
    return got
