"""A fake OpenAI-compatible upstream for the gateway soak: fast, and misbehaving on demand.

Answers ``/v1/chat/completions``, ``/v1/completions``, ``/v1/messages`` and ``/v1/responses`` (streamed
or not, each in its API's shape, with usage), ``/v1/models``, ``/health``, ``/metrics`` and ``/stats``
(JSON: connections open now, requests served). The request header ``x-fake`` picks a behaviour:

* ``ok`` (default): the answer at once (``max_tokens`` events for a stream, 8 by default);
* ``e500`` / ``e400``: a JSON error with that status;
* ``slow``: a stream of 40 events 100 ms apart (clients drop it mid-way);
* ``big``: a stream of 4,000 events of 1 kB as fast as the reader takes them (clients that never read);
* ``drop``: a stream broken after 3 events (the connection reset);
* ``reset``: the connection reset before any answer;
* ``hang``: no answer at all (the gateway's first-byte timeout ends it).

  python benchmarks/fake_upstream.py --port 8301 --model fake
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import time

STATS = {"open": 0, "served": 0, "requests": 0}
TEXT = {"chat": "delta", "completions": "text"}


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object, name: str | None = None) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return _chunk(head + b"data: " + json.dumps(obj).encode() + b"\n\n")


def _kind(path: str) -> str:
    for suffix, kind in (
        ("/chat/completions", "chat"),
        ("/completions", "completions"),
        ("/messages", "messages"),
        ("/responses", "responses"),
    ):
        if path.endswith(suffix):
            return kind
    return "other"


def _reply(kind: str, rid: str, n: int) -> dict[str, object]:
    if kind == "messages":
        usage: dict[str, int] = {"input_tokens": 16, "output_tokens": n}
        return {"id": rid, "type": "message", "role": "assistant", "content": [], "usage": usage}
    if kind == "responses":
        return {
            "id": rid,
            "object": "response",
            "status": "completed",
            "usage": {"input_tokens": 16, "output_tokens": n},
        }
    usage = {"prompt_tokens": 16, "completion_tokens": n, "total_tokens": 16 + n}
    return {
        "id": rid,
        "object": "x",
        "choices": [{"index": 0, "text": "tok", "finish_reason": "length"}],
        "usage": usage,
    }


def _token(kind: str, i: int, pad: str) -> bytes:
    if kind == "messages":
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": " tok" + pad},
        }
        return _event(delta, "content_block_delta")
    if kind == "responses":
        obj = {"type": "response.output_text.delta", "delta": " tok" + pad, "sequence_number": i}
        return _event(obj, "response.output_text.delta")
    return _event({"id": "c", "choices": [{"index": 0, "text": " tok" + pad, "finish_reason": None}]})


def _start(kind: str, rid: str) -> bytes:
    if kind == "messages":
        msg = {"id": rid, "usage": {"input_tokens": 16, "output_tokens": 0}}
        return _event({"type": "message_start", "message": msg}, "message_start")
    if kind == "responses":
        return _event(
            {"type": "response.created", "response": {"id": rid, "usage": None}}, "response.created"
        )
    return b""


def _end(kind: str, rid: str, n: int) -> bytes:
    usage = {"input_tokens": 16, "output_tokens": n}
    if kind == "messages":
        end = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": usage}
        return _event(end, "message_delta") + _event({"type": "message_stop"}, "message_stop") + b"0\r\n\r\n"
    if kind == "responses":
        done = {"type": "response.completed", "response": {"id": rid, "status": "completed", "usage": usage}}
        return _event(done, "response.completed") + b"0\r\n\r\n"
    usage = {"prompt_tokens": 16, "completion_tokens": n, "total_tokens": 16 + n}
    return _event({"id": "c", "choices": [], "usage": usage}) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:  # SO_LINGER 0: the close is a RST, not a FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _json(
    writer: asyncio.StreamWriter, status: int, obj: object, ctype: bytes = b"application/json"
) -> None:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error"}[status]
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
        % (status, reason, ctype, len(data), data)
    )
    await writer.drain()


async def _stream(writer: asyncio.StreamWriter, kind: str, rid: str, n: int, mode: str) -> bool:
    """A stream; False when the connection must end (a drop)."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    writer.write(_start(kind, rid))
    pad = "x" * 1000 if mode == "big" else ""
    n = {"slow": 40, "big": 4000}.get(mode, n)
    for i in range(n):
        if mode == "drop" and i == 3:
            await writer.drain()
            _reset(writer)
            return False
        writer.write(_token(kind, i, pad))
        if mode == "slow":
            await asyncio.sleep(0.1)
        if i % 16 == 15 or mode == "slow":
            await writer.drain()
    writer.write(_end(kind, rid, n))
    await writer.drain()
    return True


async def _head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], dict[str, object]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length") or 0)
    raw = await reader.readexactly(length) if length else b""
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    return method, path.split("?", 1)[0], headers, body if isinstance(body, dict) else {}


async def _answer(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    a: argparse.Namespace,
    method: str,
    path: str,
    headers: dict[str, str],
    body: dict[str, object],
) -> bool:
    STATS["requests"] += 1
    mode = headers.get("x-fake", "ok")
    kind = _kind(path)
    if method == "GET" and path in ("/health", "/stats", "/metrics", "/v1/models", "/version"):
        if path == "/metrics":
            await _json(writer, 200, f"vllm:num_requests_running {STATS['open']}\n".encode(), b"text/plain")
        else:
            models = {"object": "list", "data": [{"id": a.model, "object": "model", "max_model_len": 32768}]}
            await _json(writer, 200, {"/stats": STATS, "/v1/models": models}.get(path, {"version": "fake"}))
        return True
    if mode == "reset":
        _reset(writer)
        return False
    if mode == "hang":  # until the gateway gives up and closes the connection
        await reader.read()
        return False
    if mode in ("e500", "e400"):
        status = int(mode[1:])
        await _json(writer, status, {"error": {"message": f"fake {status}", "type": "fake", "code": None}})
        return True
    if kind == "other":
        await _json(writer, 404, {"detail": "Not Found"})
        return True
    rid = f"resp_{time.monotonic_ns():x}" if kind == "responses" else f"id-{STATS['requests']}"
    n = int(body.get("max_tokens") or body.get("max_output_tokens") or 8)  # type: ignore[call-overload]
    if body.get("stream") is True or mode in ("slow", "big", "drop"):
        ok = await _stream(writer, kind, rid, n, mode)
        STATS["served"] += ok
        return ok
    await _json(writer, 200, _reply(kind, rid, n))
    STATS["served"] += 1
    return True


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, a: argparse.Namespace) -> None:
    STATS["open"] += 1
    try:
        while True:
            method, path, headers, body = await _head(reader)
            if not await _answer(reader, writer, a, method, path, headers, body):
                return
            if headers.get("connection", "").lower() == "close":
                return
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
        pass
    finally:
        STATS["open"] -= 1
        writer.close()


async def main(a: argparse.Namespace) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, a), "127.0.0.1", a.port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=8301)
    p.add_argument("--model", default="fake")
    asyncio.run(main(p.parse_args()))
