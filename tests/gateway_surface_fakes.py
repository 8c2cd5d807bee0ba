"""A tiny FAKE upstream (not an engine) for the gateway's Anthropic Messages and OpenAI Responses surfaces.

``FakeSurfacesUpstream`` answers /v1/models, /v1/messages (+ count_tokens) and /v1/responses (+ GET/DELETE
/v1/responses/{id} and /cancel) in the shapes vLLM 0.32 sends (Messages SSE with ``event:`` lines and usage
in ``message_start``/``message_delta``; Responses SSE with the usage in ``response.completed``), records
every request, and can stream forever (a hang-up must reach it). ``missing`` makes it an older server: the
surfaces answer its router's 404 (``json``: FastAPI's ``{"detail": "Not Found"}``; ``text``: Ollama's
``404 page not found``) or ``405``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

USAGE = {"input_tokens": 9, "output_tokens": 8}
_ids = itertools.count(1)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeSurfacesUpstream:
    """A FAKE Messages + Responses upstream with switches the tests turn."""

    def __init__(self, served: str = "fake-served", missing: str = "", forever: bool = False) -> None:
        self.served, self.missing, self.forever = served, missing, forever
        self.requests: list[tuple[str, str, dict[str, Any] | None, dict[str, str]]] = []
        self.stored: set[str] = set()
        self.outcome = ""
        self.finished = threading.Event()
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/responses/{rid}", self._one, methods=["GET", "DELETE"]),
                Route("/v1/responses/{rid}/cancel", self._one, methods=["POST"]),
            ]
        )

    def bodies(self, path: str) -> list[dict[str, Any] | None]:
        return [b for _, p, b, _ in self.requests if p == path]

    async def _record(self, request: Request) -> dict[str, Any] | None:
        raw = await request.body()
        body = json.loads(raw) if raw else None
        self.requests.append((request.method, request.url.path, body, dict(request.headers)))
        return body

    def _absent(self) -> Response | None:
        if self.missing == "json":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        if self.missing == "text":
            return PlainTextResponse("404 page not found", status_code=404)
        if self.missing == "405":
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)
        return None

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.served, "max_model_len": 1024}]})

    async def _count(self, request: Request) -> Response:
        body = await self._record(request)
        if (absent := self._absent()) is not None:
            return absent
        if body and body.get("model") != self.served:  # vLLM's own 404: an API error, not a missing path
            error = {"type": "error", "error": {"type": "not_found_error", "message": "no such model"}}
            return JSONResponse(error, status_code=404)
        return JSONResponse({"input_tokens": 9, "context_management": None})

    async def _messages(self, request: Request) -> Response:
        body = await self._record(request)
        if (absent := self._absent()) is not None:
            return absent
        assert body is not None
        if not body.get("stream"):
            content = [{"type": "text", "text": "hi"}]
            reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"]}
            return JSONResponse({**reply, "content": content, "stop_reason": "end_turn", "usage": USAGE})
        return StreamingResponse(self._message_events(request, body), media_type="text/event-stream")

    async def _message_events(self, request: Request, body: dict[str, Any]) -> AsyncIterator[bytes]:
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [],
        }
        start_usage = {"input_tokens": 9, "output_tokens": 0}
        yield sse("message_start", {"type": "message_start", "message": {**message, "usage": start_usage}})
        async for chunk in self._maybe_forever(request):
            yield chunk
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}
        yield sse("content_block_delta", delta)
        end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": USAGE}
        yield sse("message_delta", end)
        yield sse("message_stop", {"type": "message_stop"})
        self.outcome = "done"
        self.finished.set()

    async def _maybe_forever(self, request: Request) -> AsyncIterator[bytes]:
        if not self.forever:
            return
        try:
            for _ in range(600):
                await asyncio.sleep(0.05)
                if await request.is_disconnected():
                    self.outcome = "client_gone"
                    return
                yield b": ping\n\n"
            self.outcome = "ran_out"
        except (asyncio.CancelledError, OSError, GeneratorExit):
            self.outcome = "client_gone"
            raise
        finally:
            self.finished.set()

    async def _responses(self, request: Request) -> Response:
        body = await self._record(request)
        if (absent := self._absent()) is not None:
            return absent
        assert body is not None
        rid = f"resp_{self.served.replace('-', '')}{next(_ids)}"
        self.stored.add(rid)
        usage = {"input_tokens": 11, "output_tokens": 4, "total_tokens": 15}
        done = {"id": rid, "object": "response", "model": body["model"], "status": "completed"}
        if not body.get("stream"):
            return JSONResponse({**done, "output": [], "usage": usage})

        async def events() -> AsyncIterator[bytes]:
            created = {**done, "status": "in_progress", "usage": None}
            yield sse("response.created", {"type": "response.created", "response": created})
            delta = {"type": "response.output_text.delta", "delta": "hi", "item_id": "msg_1"}
            yield sse("response.output_text.delta", delta)
            final = {"type": "response.completed", "response": {**done, "usage": usage}}
            yield sse("response.completed", final)
            async for chunk in self._maybe_forever(request):  # a backend slow to close after the end
                yield chunk

        return StreamingResponse(events(), media_type="text/event-stream")

    async def _one(self, request: Request) -> Response:
        await self._record(request)
        rid = request.path_params["rid"]
        if rid not in self.stored:
            error = {"message": f"Response with id '{rid}' not found.", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=404)
        return JSONResponse({"id": rid, "object": "response", "status": "completed", "by": self.served})
