"""Real clients' recorded traffic, and the context budget it implies.

A recording (``recordings/<client>-<version>.json``, made by ``evidence/clients/record.sh``) holds
the first chat requests a real agent sent: its system prompt, its tool schemas, its parameters, and
(from the client's source) which reply fields it reads. ``llmdeck check --client`` replays the
agent's request against the server with the served model's name swapped in; ``llmdeck connect``
writes the client's context and output limits from the same :func:`budget`.

The budget of one conversation on a server of ``max_model_len`` tokens:

* the base prompt: the client's system prompt + tool schemas + the first user message, counted on
  the server (``POST /tokenize`` with the client's messages and tools: the served tokenizer and
  chat template), else the recording's count (the Qwen3 tokenizer);
* the output the client reserves: what ``connect`` writes as its output limit (sent as
  ``max_tokens``), a quarter of the context within 1K..32K;
* a margin of one typical turn for the tool result that lands after the client's last count
  (clients count with their own estimates, and compact only once a reply's usage crosses their line);
* what is left, in turns of a typical tool loop: one assistant tool call plus its result (a ~2 KB
  file read), :data:`TURN_TOKENS` tokens.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.checks.surfaces import Surface, chat_view, chunk_deltas, requested_output, tool_names

TURN_TOKENS = 600
MIN_TURNS = 4
CONTEXT_MARGIN = 1024
LADDER: tuple[int, ...] = (4096, 8192, 16384, 32768, 65536, 131072, 262144)
RECORDINGS = "llmdeck.checks.recordings"


class ClientReads(BaseModel):
    """Which reply fields the client parses (from its source, cited in ``source``)."""

    reasoning: list[str] = Field(default_factory=list, description="Fields it shows as thinking, in order.")
    thinking: str = Field(
        default="", description="Thinking blocks or reasoning items it reads (Messages, Responses)."
    )
    tool_call_deltas: str = ""
    usage: list[str] = Field(default_factory=list, description="Usage fields it reads.")
    compaction: str = ""
    context_overflow: str = Field(
        default="", description="What the real client does when the server refuses for context."
    )
    source: str = ""


class RecordedRequest(BaseModel):
    path: str
    query: str | None = None
    user_agent: str | None = None
    prompt_tokens: int = Field(description="Prompt tokens with the Qwen3 tokenizer at record time.")
    tools: int = 0
    role: Literal["agent", "auxiliary"] = "agent"
    body: dict[str, Any]


class Recording(BaseModel):
    """What one real client sent, by name and version."""

    schema_version: int = 1
    kind: Literal["llmdeck.client-recording"] = "llmdeck.client-recording"
    client: str
    client_version: str
    package: str
    command: str
    recorded_at: str
    tokenizer: str = ""
    reads: ClientReads = Field(default_factory=ClientReads)
    surface: Surface = "chat"
    other_requests: list[str] = Field(default_factory=list, description="Non-model requests, e.g. HEAD /.")
    requests: list[RecordedRequest]

    @property
    def agent(self) -> RecordedRequest:
        """The agent loop's request (system prompt + tools), not a title or summary side request."""
        return next((r for r in self.requests if r.role == "agent"), self.requests[0])

    @property
    def label(self) -> str:
        return f"{self.client} {self.client_version}"

    def tool_names(self) -> list[str]:
        return tool_names(self.agent.path, self.agent.body)

    @property
    def max_tokens(self) -> int | None:
        """The output the client asks for in its agent request (None: it sends no limit)."""
        return requested_output(self.agent.path, self.agent.body)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.replace("-", ".").split("."))


@functools.cache
def recordings() -> dict[str, Recording]:
    """The newest recording of each client shipped with llmdeck."""
    found: dict[str, Recording] = {}
    for entry in resources.files(RECORDINGS).iterdir():
        if not entry.name.endswith(".json"):
            continue
        rec = Recording.model_validate(json.loads(entry.read_text(encoding="utf-8")))
        old = found.get(rec.client)
        if old is None or _version_key(rec.client_version) > _version_key(old.client_version):
            found[rec.client] = rec
    return found


def load_recording(client: str | None) -> Recording | None:
    return recordings().get(client) if client else None


def output_limit(max_model_len: int | None) -> int:
    """The max output connect writes (and the client sends as max_tokens): a quarter, 1K..32K."""
    if not max_model_len:
        return 4096
    return max(1024, min(32768, max_model_len // 4))


class Budget(BaseModel):
    """One conversation of a client on a server of ``max_model_len`` tokens."""

    max_model_len: int
    base_tokens: int
    output: int
    margin: int
    turns: int = Field(description="Typical tool-loop turns that fit before the client must compact.")
    first_request_fits: bool

    @property
    def context(self) -> int:
        """The context limit to give the client: it compacts before the server refuses."""
        return self.max_model_len - self.margin

    @property
    def ok(self) -> bool:
        return self.turns >= MIN_TURNS

    @property
    def usable(self) -> bool:
        """At least one tool-loop turn fits: connect writes a config, check warns."""
        return self.turns >= 1


def budget(max_model_len: int, base_tokens: int) -> Budget:
    out = output_limit(max_model_len)
    margin = min(CONTEXT_MARGIN, max_model_len // 8)
    room = max_model_len - margin - out - base_tokens
    return Budget(
        max_model_len=max_model_len,
        base_tokens=base_tokens,
        output=out,
        margin=margin,
        turns=max(0, room // TURN_TOKENS),
        first_request_fits=base_tokens + out <= max_model_len,
    )


def recommend_max_model_len(base_tokens: int) -> int:
    """The smallest usual --max-model-len that holds the base prompt with room for MIN_TURNS turns."""
    for size in LADDER:
        if budget(size, base_tokens).ok:
            return size
    return LADDER[-1]


def budget_words(b: Budget) -> str:
    return (
        f"base prompt {b.base_tokens} + output {b.output} + margin {b.margin} of max_model_len "
        f"{b.max_model_len} leave {b.turns} turn(s) of a typical tool loop (~{TURN_TOKENS} tokens each: "
        "a tool call and a ~2 KB result)"
    )


def replay_body(rec: Recording, model: str, *, max_tokens: int, **overrides: Any) -> dict[str, Any]:
    """The client's agent request as it sent it, with the served model and a small max_tokens."""
    body = copy.deepcopy(rec.agent.body)
    body["model"] = model
    body["max_tokens"] = max_tokens
    body.pop("max_completion_tokens", None)
    body.update(overrides)
    return body


def tokenize_body(rec: Recording, model: str) -> dict[str, Any]:
    """``POST /tokenize`` of the client's base prompt: its messages and tools, as the server renders them."""
    messages, tools = chat_view(rec.agent.path, copy.deepcopy(rec.agent.body))
    body: dict[str, Any] = {"model": model, "messages": messages, "add_generation_prompt": True}
    if tools:
        body["tools"] = tools
    return body


def smallest_tool(rec: Recording) -> str | None:
    """The client's tool with the smallest schema (a forced call of it ends soonest)."""
    tools = rec.agent.body.get("tools") or []
    if not tools:
        return None
    best = min(tools, key=lambda t: len(json.dumps(t.get("function", {}).get("parameters") or {})))
    name = best.get("function", {}).get("name")
    return str(name) if name else None


def parse_tool_stream(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None, str]:
    """Accumulate streamed tool calls the way the AI SDK (opencode, cline) and Continue do.

    By ``index``; the first delta of an index must carry ``id`` and ``function.name``; arguments are
    concatenated. Returns (calls, the first error the client would raise, text content seen).
    """
    calls: dict[int, dict[str, Any]] = {}
    text = ""
    for delta in chunk_deltas(chunks):
        content = delta.get("content")
        text += content if isinstance(content, str) else ""
        tool_calls = delta.get("tool_calls")
        for tc in tool_calls if isinstance(tool_calls, list) else []:
            if not isinstance(tc, dict):
                return list(calls.values()), "Expected each tool call delta to be an object.", text
            index = tc.get("index", len(calls))
            if isinstance(index, bool) or not isinstance(index, int):
                return list(calls.values()), "Expected 'index' to be a number.", text
            fn_field = tc.get("function")
            fn: dict[str, Any] = fn_field if isinstance(fn_field, dict) else {}
            if index not in calls:
                if not isinstance(tc.get("id"), str) or not tc["id"]:
                    return list(calls.values()), "Expected 'id' to be a string.", text
                if not isinstance(fn.get("name"), str) or not fn["name"]:
                    return list(calls.values()), "Expected 'function.name' to be a string.", text
                calls[index] = {"id": tc["id"], "name": fn["name"], "arguments": ""}
            args = fn.get("arguments")
            if args is not None and not isinstance(args, str):
                return list(calls.values()), "Expected 'function.arguments' to be a string.", text
            calls[index]["arguments"] += args or ""
    return list(calls.values()), None, text
