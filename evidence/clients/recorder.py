"""A capture endpoint for recording what a real agent sends (evidence/clients/record.sh).

Serves just enough of the OpenAI API for a client to go on: ``GET /v1/models`` lists one model,
``POST /v1/chat/completions`` answers a minimal valid reply (streamed when asked: one text delta,
``finish_reason: stop``, a usage chunk when ``stream_options.include_usage``, then ``[DONE]``);
the Anthropic Messages API for Claude Code (``HEAD /``, ``POST /v1/messages`` streamed or not,
``POST /v1/messages/count_tokens``) and the Responses API for Codex (``POST /v1/responses``, streamed:
one output_text message, then ``response.completed`` with usage).
Every request is appended to ``OUT`` as one JSON line: method, path, headers (Authorization and
other secrets redacted) and the parsed body. This is a recorder, not an engine: the recordings it
makes are replayed against real vLLM servers by ``llmdeck check --client``.

    python evidence/clients/recorder.py --port 18555 --out /tmp/rec.jsonl --model tiny-qwen3
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"}
REPLY_TEXT = "Done."


def _redact(headers: dict[str, str]) -> dict[str, str]:
    return {k: ("<redacted>" if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-rec",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


def _reply(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-rec",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": REPLY_TEXT}, "finish_reason": "stop"}
        ],
        "usage": _usage(),
    }


async def _events(model: str, with_usage: bool) -> AsyncIterator[bytes]:
    for chunk in (
        _chunk(model, {"role": "assistant", "content": ""}, None),
        _chunk(model, {"content": REPLY_TEXT}, None),
        _chunk(model, {}, "stop"),
    ):
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    if with_usage:
        last = {**_chunk(model, {}, None), "choices": [], "usage": _usage()}
        yield f"data: {json.dumps(last)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _message(model: str, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    usage = {
        "input_tokens": 10,
        "output_tokens": 2,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    return {
        "id": "msg_rec",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


async def _anthropic_events(model: str) -> AsyncIterator[bytes]:
    yield _sse("message_start", {"type": "message_start", "message": _message(model, [], None)})
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    yield _sse("content_block_start", block)
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": REPLY_TEXT}}
    yield _sse("content_block_delta", delta)
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
    yield _sse("message_delta", {**end, "usage": {"output_tokens": 2}})
    yield _sse("message_stop", {"type": "message_stop"})


def _response(model: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 12,
    }
    return {
        "id": "resp_rec",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage if status == "completed" else None,
    }


async def _responses_events(model: str) -> AsyncIterator[bytes]:
    seq = iter(range(100))
    item: dict[str, Any] = {"id": "msg_rec", "type": "message", "status": "in_progress", "role": "assistant"}
    part = {"type": "output_text", "text": "", "annotations": []}
    done_part = {**part, "text": REPLY_TEXT}
    done_item = {**item, "status": "completed", "content": [done_part]}
    ids = {"item_id": "msg_rec", "output_index": 0}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response(model, "in_progress", [])}),
        ("response.in_progress", {"response": _response(model, "in_progress", [])}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.content_part.added", {**ids, "content_index": 0, "part": part}),
        ("response.output_text.delta", {**ids, "content_index": 0, "delta": REPLY_TEXT}),
        ("response.output_text.done", {**ids, "content_index": 0, "text": REPLY_TEXT}),
        ("response.content_part.done", {**ids, "content_index": 0, "part": done_part}),
        ("response.output_item.done", {"output_index": 0, "item": done_item}),
        ("response.completed", {"response": _response(model, "completed", [done_item])}),
    ]
    for name, data in events:
        yield _sse(name, {"type": name, "sequence_number": next(seq), **data})


async def _anthropic_tool_events(model: str, name: str, args: dict[str, Any]) -> AsyncIterator[bytes]:
    """One ``tool_use`` block (``--tool-first``): what the client sends after running it is recorded."""
    yield _sse("message_start", {"type": "message_start", "message": _message(model, [], None)})
    use = {"type": "tool_use", "id": "toolu_rec1", "name": name, "input": {}}
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": use})
    delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
    yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    end = {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}}
    yield _sse("message_delta", {**end, "usage": {"output_tokens": 8}})
    yield _sse("message_stop", {"type": "message_stop"})


def _refusal(path: str, limit: int) -> JSONResponse:
    """What vLLM answers a prompt over its context: HTTP 400 (Anthropic error shape on /v1/messages)."""
    text = (
        f"This model's maximum context length is {limit} tokens. However, your request has more input tokens."
    )
    if path.endswith("/messages"):
        err: dict[str, Any] = {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    else:
        err = {"error": {"message": text, "type": "BadRequestError", "param": None, "code": 400}}
    return JSONResponse(err, status_code=400)


def make_app(out: Path, model: str, refuse: int = 0, tool_first: str = "") -> Starlette:
    tool_name, _, tool_args = tool_first.partition(":")
    pending = {"tool": bool(tool_name)}

    async def record(request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        entry = {
            "t": time.time(),
            "method": request.method,
            "path": request.url.path,
            "query": request.url.query,
            "headers": _redact(dict(request.headers)),
            "body": body,
        }
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return body if isinstance(body, dict) else {}

    async def models(request: Request) -> Response:
        await record(request)
        data = [{"id": model, "object": "model", "owned_by": "recorder", "max_model_len": 131072}]
        return JSONResponse({"object": "list", "data": data})

    async def chat(request: Request) -> Response:
        body = await record(request)
        if refuse:
            return _refusal(request.url.path, refuse)
        if not body.get("stream"):
            return JSONResponse(_reply(model))
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(_events(model, with_usage), media_type="text/event-stream")

    async def messages(request: Request) -> Response:
        body = await record(request)
        if refuse:
            return _refusal(request.url.path, refuse)
        names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if pending["tool"] and body.get("stream") and tool_name in names:
            pending["tool"] = False
            events = _anthropic_tool_events(model, tool_name, json.loads(tool_args or "{}"))
            return StreamingResponse(events, media_type="text/event-stream")
        if not body.get("stream"):
            return JSONResponse(_message(model, [{"type": "text", "text": REPLY_TEXT}], "end_turn"))
        return StreamingResponse(_anthropic_events(model), media_type="text/event-stream")

    async def count_tokens(request: Request) -> Response:
        body = await record(request)
        return JSONResponse({"input_tokens": len(json.dumps(body)) // 4})

    async def responses(request: Request) -> Response:
        body = await record(request)
        if refuse:
            return _refusal(request.url.path, refuse)
        if not body.get("stream"):
            part = {"type": "output_text", "text": REPLY_TEXT, "annotations": []}
            item = {"id": "msg_rec", "type": "message", "status": "completed", "role": "assistant"}
            return JSONResponse(_response(model, "completed", [{**item, "content": [part]}]))
        return StreamingResponse(_responses_events(model), media_type="text/event-stream")

    async def root(request: Request) -> Response:
        await record(request)
        return Response(status_code=200)

    async def other(request: Request) -> Response:
        await record(request)
        return JSONResponse({"error": {"message": "not recorded here"}}, status_code=404)

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/responses", responses, methods=["POST"]),
        Route("/", root, methods=["GET", "HEAD"]),
        Route("/{rest:path}", other, methods=["GET", "HEAD", "POST", "PUT", "DELETE"]),
    ]
    return Starlette(routes=routes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="tiny-qwen3")
    ap.add_argument(
        "--refuse-context", type=int, default=0, help="Refuse every model request as over N tokens."
    )
    ap.add_argument(
        "--tool-first",
        default="",
        help="NAME:JSON: answer the first streamed Messages request that offers tool NAME with one "
        "tool_use of it (input JSON), to record what the client sends back.",
    )
    args = ap.parse_args()
    uvicorn.run(
        make_app(args.out, args.model, args.refuse_context, args.tool_first),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
