"""Ollama's native API (``/api/chat``, ``/api/generate``) as OpenAI chat completions, and back.

A client written for Ollama (its Python and JS libraries, LangChain's ``ChatOllama``, editors' "Ollama"
providers) sends Ollama's shapes; vLLM serves OpenAI's. Requests are rewritten here (``chat_body``,
``generate_body``), replies rewritten back: a whole reply (``whole_reply``), a stream of server-sent
events into Ollama's newline-delimited JSON (``NdjsonStream``), an error into Ollama's ``{"error": …}``.
Pure functions of dicts and bytes: the gateway's routes (ollama_app.py) do the HTTP.

What has no OpenAI counterpart is said, not guessed: ``suffix`` (fill-in-the-middle), a ``template`` and
the deprecated ``context`` are refused with the reason; Ollama's runtime options (``num_ctx``,
``num_gpu``, ``num_thread``, …) are ignored: vLLM's launch flags set them for every client.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any, Literal

from llmdeck.errors import UsageError
from llmdeck.gateway.outcap import message_of
from llmdeck.util.jsonsafe import loads as json_loads

# raw: /api/generate with ``raw: true`` (OpenAI completions); embed: /api/embed; embeddings: the older
# /api/embeddings (one prompt, one vector)
Kind = Literal["chat", "generate", "raw", "embed", "embeddings"]

# Ollama's sampling options as vLLM names them (vLLM takes top_k, min_p and repetition_penalty too)
_OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "seed": "seed",
    "stop": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "repeat_penalty": "repetition_penalty",
    "num_predict": "max_tokens",
}
_EFFORT = ("low", "medium", "high")  # ``think`` as a level (gpt-oss): OpenAI's reasoning_effort
_IMAGE_TYPES = {"iVBOR": "image/png", "/9j/": "image/jpeg", "R0lGOD": "image/gif", "UklGR": "image/webp"}


class OllamaRequestError(UsageError):
    """A request in Ollama's shape that cannot be served: the client is told why (HTTP 400)."""


def streams(req: dict[str, Any]) -> bool:
    """Ollama streams unless told not to (``"stream": false``)."""
    stream = req.get("stream", True)
    if stream is not None and not isinstance(stream, bool):
        raise OllamaRequestError("`stream` must be true or false.")
    return stream is not False


def chat_body(req: dict[str, Any]) -> dict[str, Any]:
    """An ``/api/chat`` request as an OpenAI chat completions body."""
    messages = req.get("messages")
    if not isinstance(messages, list):
        raise OllamaRequestError('`messages` must be a list of messages ({"role": …, "content": …}).')
    body: dict[str, Any] = {"model": req["model"], "messages": _messages(messages)}
    tools = req.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise OllamaRequestError('`tools` must be a list of tools ({"type": "function", "function": …}).')
    if tools:  # Ollama's Python client sends `"tools": []` with every chat: vLLM refuses an empty list
        body["tools"] = tools
    return _common(req, body)


def generate_body(req: dict[str, Any]) -> tuple[Kind, dict[str, Any]]:
    """An ``/api/generate`` request as a chat completions body (``raw``: a completions body)."""
    for field, why in (
        ("suffix", "fill-in-the-middle (`suffix`) is not served: vLLM's completions refuse it"),
        ("template", "a `template` is not applied: the model's own chat template is"),
        ("context", "the deprecated `context` is not kept: send the conversation to /api/chat"),
    ):
        if req.get(field):
            raise OllamaRequestError(f"{why}.")
    prompt = _text(req.get("prompt"), "prompt")
    if req.get("raw"):
        return "raw", _common(req, {"model": req["model"], "prompt": prompt})
    messages: list[dict[str, Any]] = []
    if req.get("system"):
        messages.append({"role": "system", "content": _text(req["system"], "system")})
    messages.append({"role": "user", "content": _content(prompt, req.get("images"))})
    return "generate", _common(req, {"model": req["model"], "messages": messages})


def embed_body(req: dict[str, Any], kind: Kind) -> dict[str, Any]:
    """``/api/embed`` (``input``: text or a list of texts) or ``/api/embeddings`` (``prompt``) as an OpenAI
    embeddings body. Ollama cuts an input longer than the context unless ``truncate: false``; vLLM
    refuses one unless asked to cut it (``truncate_prompt_tokens: -1``: to its max_model_len)."""
    if kind == "embeddings":
        return {"model": req["model"], "input": _text(req.get("prompt"), "prompt")}
    given = req.get("input", "")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise OllamaRequestError("`input` must be text or a list of texts.")
    body: dict[str, Any] = {"model": req["model"], "input": given}
    if req.get("truncate", True) is not False:
        body["truncate_prompt_tokens"] = -1
    if req.get("dimensions") is not None:
        if not isinstance(req["dimensions"], int) or isinstance(req["dimensions"], bool):
            raise OllamaRequestError("`dimensions` must be a whole number.")
        body["dimensions"] = req["dimensions"]
    return body


def _common(req: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    body["stream"] = streams(req)
    if body["stream"]:
        body["stream_options"] = {"include_usage": True}  # the final line's token counts
    _options(req.get("options"), body)
    _format(req.get("format"), body)
    think = req.get("think")
    if isinstance(think, bool):
        body["chat_template_kwargs"] = {"enable_thinking": think}
    elif think in _EFFORT:
        body["reasoning_effort"] = think
    elif think is not None:
        raise OllamaRequestError('`think` must be true, false, "low", "medium" or "high".')
    return body


def _options(options: Any, body: dict[str, Any]) -> None:
    if options is None:
        return
    if not isinstance(options, dict):
        raise OllamaRequestError(
            '`options` must be an object (e.g. {"temperature": 0.2, "num_predict": 256}).'
        )
    for name, value in options.items():
        target = _OPTIONS.get(name)
        if target is None or value is None:
            continue  # runtime options (num_ctx, num_gpu, …): vLLM's launch flags decide them
        if name == "num_predict" and isinstance(value, int) and value < 0:
            continue  # -1 (no limit) and -2 (fill the context): vLLM's default is the room left
        body[target] = value


def _format(fmt: Any, body: dict[str, Any]) -> None:
    if fmt in (None, ""):
        return
    if fmt == "json":
        body["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt}}
    else:
        raise OllamaRequestError('`format` must be "json" or a JSON schema (an object).')


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OllamaRequestError(f"`{field}` must be text.")
    return value


def _content(text: str, images: Any) -> str | list[dict[str, Any]]:
    """A message's text, with its images (Ollama sends them base64) as OpenAI's image parts."""
    if not images:
        return text
    if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
        raise OllamaRequestError("`images` must be a list of base64-encoded images.")
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for data in images:
        kind = next((t for head, t in _IMAGE_TYPES.items() if data.startswith(head)), "image/png")
        parts.append({"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}})
    return parts


def _messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Ollama's messages in OpenAI's terms: tool calls get ids (Ollama's have none) and each tool
    message answers the oldest open call of its ``tool_name`` (else the oldest open one)."""
    out: list[dict[str, Any]] = []
    open_calls: list[tuple[str, str]] = []  # (id, function name) not answered yet
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise OllamaRequestError(
                f"messages[{i}] must be an object with a `role` (system, user, assistant, tool)."
            )
        item: dict[str, Any] = {"role": msg["role"]}
        item["content"] = _content(_text(msg.get("content"), f"messages[{i}].content"), msg.get("images"))
        if msg.get("tool_calls"):
            item["tool_calls"] = _calls_out(msg["tool_calls"], i, open_calls)
        if msg["role"] == "tool":
            name = msg.get("tool_name") or msg.get("name")
            hit = next((c for c in open_calls if c[1] == name), open_calls[0] if open_calls else None)
            if hit is not None:
                open_calls.remove(hit)
            item["tool_call_id"] = hit[0] if hit is not None else f"call_{i}"
        out.append(item)
    return out


def _calls_out(calls: Any, i: int, open_calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise OllamaRequestError(f"messages[{i}].tool_calls must be a list.")
    out = []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise OllamaRequestError(f"messages[{i}].tool_calls[{j}] must have a `function` with a `name`.")
        args = fn.get("arguments") or {}
        call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{i}_{j}"
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        out.append({"id": call_id, "type": "function", "function": {"name": fn["name"], "arguments": text}})
        open_calls.append((call_id, fn["name"]))
    return out


def now_iso(ts: float | None = None) -> str:
    """Ollama's times (``created_at``, ``modified_at``): UTC, microseconds, a ``Z``; now, or ``ts``."""
    when = datetime.now(UTC) if ts is None else datetime.fromtimestamp(ts, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def calls_in(calls: Any) -> list[dict[str, Any]]:
    """OpenAI tool calls (arguments as JSON text) as Ollama's (arguments as an object)."""
    out = []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        raw = fn.get("arguments") or "{}"
        try:
            args = json_loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = None
        if not isinstance(args, dict):  # Ollama's clients read an object: the text is kept, not lost
            args = {"arguments": raw}
        out.append({"function": {"name": fn.get("name") or "", "arguments": args}})
    return out


def done_reason(finish: Any) -> str:
    return "length" if finish == "length" else "stop"


def counts(usage: Any, started: float, first: float | None) -> dict[str, int]:
    """The final line's figures (nanoseconds): the whole request; with a stream, the prompt's part
    (until the first token) and the generation's."""
    now = time.perf_counter()
    out = {"total_duration": int((now - started) * 1e9)}
    if first is not None:
        out["prompt_eval_duration"] = int((first - started) * 1e9)
        out["eval_duration"] = int((now - first) * 1e9)
    if isinstance(usage, dict):
        for ours, theirs in (("prompt_eval_count", "prompt_tokens"), ("eval_count", "completion_tokens")):
            if isinstance(usage.get(theirs), int):
                out[ours] = usage[theirs]
    return out


def error_message(body: bytes, status: int) -> str:
    """The words of an error reply (OpenAI's ``{"error": {"message"}}``, vLLM's older ``{"message"}``,
    Ollama's ``{"error": "…"}``), else its text. A reply nested too deep is text too, not a crash."""
    said = message_of(body)
    if said is None:
        try:
            data = json_loads(body)
        except ValueError:
            data = None
        found = data.get("error", data.get("message")) if isinstance(data, dict) else None
        said = found if isinstance(found, str) else None
    return said or body.decode("utf-8", "replace").strip()[:2000] or f"HTTP {status}"
