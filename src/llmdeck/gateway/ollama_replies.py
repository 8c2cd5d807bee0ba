"""OpenAI replies in Ollama's shapes: a whole reply (``whole_reply``), a stream of server-sent events as
Ollama's newline-delimited JSON (``NdjsonStream``): a line per piece of text or thinking, the tool calls
whole (Ollama's clients read their arguments as an object, not as pieces of JSON text), then the last
line with ``"done": true``, the reason and the figures. An error event becomes ``{"error": …}``, as
Ollama ends a stream that fails."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from llmdeck.client.replies import merge_tool_calls
from llmdeck.gateway.ollama_shapes import Kind, calls_in, counts, done_reason, error_message, now_iso
from llmdeck.util.jsonsafe import loads as json_loads

WHOLE_LIMIT = 64 << 20  # a whole reply read to be rewritten: a backend's endless body is cut off here


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _line(obj: dict[str, Any]) -> bytes:
    try:
        return _json(obj) + b"\n"
    except RecursionError:  # a backend's tool arguments nested past the encoder's depth
        return _json({"error": "The backend's reply nests too deeply to pass on."}) + b"\n"


def _piece(
    kind: Kind, model: str, text: str, thinking: str = "", tool_calls: list[Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """One reply (a stream's line or the whole) as Ollama writes it for ``/api/chat`` or ``/api/generate``."""
    head: dict[str, Any] = {"model": model, "created_at": now_iso()}
    if kind != "chat":
        return {**head, "response": text, **({"thinking": thinking} if thinking else {}), **extra}
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        message["thinking"] = thinking
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {**head, "message": message, **extra}


def _thinking(part: dict[str, Any]) -> str:
    value = part.get("reasoning_content") or part.get("reasoning")  # vLLM's older and newer names
    return value if isinstance(value, str) else ""


def whole_reply(kind: Kind, model: str, body: bytes, started: float) -> bytes:
    """A whole OpenAI reply (chat completion, completion for ``raw``, embeddings) as Ollama's one object."""
    if kind in ("embed", "embeddings"):
        return embed_reply(kind, model, body, started)
    try:
        data = json_loads(body)
        choice = data["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return _line({"error": "The backend's reply was no chat completion: " + error_message(body, 200)})
    msg = choice.get("message") if kind != "raw" else {"content": choice.get("text")}
    msg = msg if isinstance(msg, dict) else {}
    text = msg["content"] if isinstance(msg.get("content"), str) else ""
    extra: dict[str, Any] = {"done": True, "done_reason": done_reason(choice.get("finish_reason"))}
    extra |= counts(data.get("usage"), started, None)
    calls = calls_in(msg.get("tool_calls"))
    return _line(_piece(kind, model, text, _thinking(msg), tool_calls=calls, **extra))


def embed_reply(kind: Kind, model: str, body: bytes, started: float) -> bytes:
    """OpenAI's embeddings list as ``/api/embed``'s ``embeddings`` (in the inputs' order) or
    ``/api/embeddings``' one ``embedding``."""
    try:
        data = json_loads(body)
        items = sorted(data["data"], key=lambda item: item.get("index", 0))
        vectors = [item["embedding"] for item in items]
    except (ValueError, KeyError, TypeError, AttributeError):
        return _line({"error": "The backend's reply was no embeddings list: " + error_message(body, 200)})
    if kind == "embeddings":
        return _line({"embedding": vectors[0] if vectors else []})
    figures = counts(data.get("usage"), started, None)
    figures.pop("eval_count", None)
    return _line({"model": model, "embeddings": vectors, **figures})


class NdjsonStream:
    """Server-sent events (whole events, as the relay hands them on) in, Ollama's lines out."""

    def __init__(self, kind: Kind, model: str, started: float) -> None:
        self.kind, self.model, self.started = kind, model, started
        self.first: float | None = None
        self.finish: Any = None
        self.usage: Any = None
        self.tools: dict[int, dict[str, Any]] = {}
        self.ended = False
        self._held = b""
        self._head = b'{"model":' + _json(model) + b',"created_at":"'
        self._now = b""  # one created_at per chunk of events (a line each is most of a chunk's cost)

    def feed(self, chunk: bytes) -> bytes:
        data = self._held + chunk
        cut = max(data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n"))
        if cut < 0:
            self._held = data
            return b""
        self._held = data[cut:].lstrip(b"\r\n")
        self._now = now_iso().encode()
        out = [self._event(event) for event in data[:cut].replace(b"\r\n", b"\n").split(b"\n\n")]
        return b"".join(out)

    def _event(self, event: bytes) -> bytes:
        payload = b"".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if not payload or self.ended:
            return b""
        if payload == b"[DONE]":
            return self.end()
        try:
            data = json_loads(payload)
        except ValueError:
            return b""  # a comment or a keep-alive
        if not isinstance(data, dict):
            return b""
        if "error" in data:
            self.ended = True
            return _line({"error": error_message(payload, 500)})
        if data.get("usage"):
            self.usage = data["usage"]
        choices = data.get("choices")
        return self._choice(choices[0]) if isinstance(choices, list) and choices else b""

    def _choice(self, choice: Any) -> bytes:
        if not isinstance(choice, dict):
            return b""
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta") if self.kind != "raw" else {"content": choice.get("text")}
        delta = delta if isinstance(delta, dict) else {}
        if isinstance(delta.get("tool_calls"), list):
            merge_tool_calls(self.tools, delta["tool_calls"])
        text = delta["content"] if isinstance(delta.get("content"), str) else ""
        thinking = _thinking(delta)
        if not text and not thinking:
            return b""
        if self.first is None:
            self.first = time.perf_counter()
        return self._text_line(text, thinking)

    def _text_line(self, text: str, thinking: str) -> bytes:
        """What ``_line(_piece(…, done=False))`` writes, from a template: the stream's hot path."""
        more = b',"thinking":' + _json(thinking) if thinking else b""
        if self.kind == "chat":
            body = b'","message":{"role":"assistant","content":' + _json(text) + more + b'},"done":false}\n'
        else:
            body = b'","response":' + _json(text) + more + b',"done":false}\n'
        return self._head + self._now + body

    def end(self) -> bytes:
        """The last line (once): the tool calls, if any, then ``done`` with the reason and the figures."""
        if self.ended:
            return b""
        self.ended = True
        calls = calls_in([self.tools[i] for i in sorted(self.tools)])
        out = _line(_piece(self.kind, self.model, "", tool_calls=calls, done=False)) if calls else b""
        figures: dict[str, Any] = counts(self.usage, self.started, self.first)
        return out + _line(
            _piece(self.kind, self.model, "", done=True, done_reason=done_reason(self.finish), **figures)
        )

    async def translate(self, events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in events:
            if lines := self.feed(chunk):
                yield lines
        if tail := self.feed(b"\n\n") + self.end():
            yield tail


async def whole(kind: Kind, model: str, started: float, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A whole reply, read (bounded) and then rewritten."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > WHOLE_LIMIT:
            yield _line({"error": f"The backend's reply was over {WHOLE_LIMIT >> 20} MiB."})
            return
    yield whole_reply(kind, model, bytes(body), started)


async def error_reply(status: int, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A backend's error reply (read up to 64 KiB) as Ollama's ``{"error": …}``."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk[: 65536 - len(body)]
        if len(body) >= 65536:
            break
    yield _line({"error": error_message(bytes(body), status)})
