"""A capture endpoint for recording what a real agent sends (evidence/clients/record.sh).

Serves just enough of the OpenAI API for a client to go on: ``GET /v1/models`` lists one model,
``POST /v1/chat/completions`` answers a minimal valid reply (streamed when asked: one text delta,
``finish_reason: stop``, a usage chunk when ``stream_options.include_usage``, then ``[DONE]``).
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


def make_app(out: Path, model: str) -> Starlette:
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
        if not body.get("stream"):
            return JSONResponse(_reply(model))
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(_events(model, with_usage), media_type="text/event-stream")

    async def other(request: Request) -> Response:
        await record(request)
        return JSONResponse({"error": {"message": "not recorded here"}}, status_code=404)

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/{rest:path}", other, methods=["GET", "POST", "PUT", "DELETE"]),
    ]
    return Starlette(routes=routes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="tiny-qwen3")
    args = ap.parse_args()
    uvicorn.run(make_app(args.out, args.model), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
