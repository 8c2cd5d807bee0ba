"""FakePacedServer: an OpenAI-compatible completions server with exact, known timing.

Every streamed completion waits ``--ttft-ms`` before its first token, then ``--itl-ms`` between
tokens, and sends ``max_tokens`` tokens (one per chunk) plus a usage chunk and ``[DONE]``, the
way vLLM streams. The true TTFT/TPOT/ITL are known, and unlike a real engine it adds no
run-to-run noise, so two clients measuring it can be compared to well under 3%.

It counts the streams it is serving at once: ``GET /metrics`` answers with vLLM's gauge name
(``vllm:num_requests_running``, so a client samples it the same way as a real server's), ``GET /stats``
with JSON (``streams`` now, ``max_streams`` so far, ``served`` in all), and ``--stats-every S`` prints
a line with the count every S seconds (to tell a fixed cap from periodic convoys).

  python benchmarks/fake_paced_server.py --port 8199 --ttft-ms 40 --itl-ms 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

STATS = {"streams": 0, "max_streams": 0, "served": 0}


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, a: argparse.Namespace) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            body = json.loads(await reader.readexactly(length)) if length else {}
            if method == "GET":
                if path == "/v1/models":
                    obj = {
                        "object": "list",
                        "data": [{"id": a.model, "object": "model", "max_model_len": 32768}],
                    }
                elif path == "/version":
                    obj = {"version": "fake-paced"}
                elif path == "/stats":
                    obj = dict(STATS)
                elif path == "/metrics":
                    text = f'vllm:num_requests_running{{model_name="{a.model}"}} {STATS["streams"]}\n'
                    data = text.encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(data), data)
                    )
                    await writer.drain()
                    continue
                else:
                    obj = {}
                data = json.dumps(obj).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
                await writer.drain()
                continue
            STATS["streams"] += 1
            STATS["max_streams"] = max(STATS["max_streams"], STATS["streams"])
            try:
                await stream(writer, body, a, path.split("?", 1)[0])
            finally:
                STATS["streams"] -= 1
                STATS["served"] += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _sse(name: str, obj: object) -> bytes:
    data = f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def _token_event(path: str, i: int, fin: str | None, t0: float) -> bytes:
    """One token in the API's own shape: Messages, Responses, or (else) completions."""
    if path == "/v1/messages":
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " tok"}}
        return _sse("content_block_delta", delta)
    if path == "/v1/responses":
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "delta": " tok",
            "sequence_number": i,
        }
        return _sse("response.output_text.delta", delta)
    choice: dict[str, object] = {"index": 0, "text": " tok", "finish_reason": fin}
    if path == "/v1/chat/completions":
        choice = {"index": 0, "delta": {"content": " tok"}, "finish_reason": fin}
    data = b"data: " + json.dumps({"id": f"{t0:.6f}", "choices": [choice]}).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _tail(path: str, n: int) -> bytes:
    usage = {"input_tokens": 16, "output_tokens": n}
    if path == "/v1/messages":
        end = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": usage}
        return _sse("message_delta", end) + _sse("message_stop", {"type": "message_stop"}) + b"0\r\n\r\n"
    done = {
        "type": "response.completed",
        "response": {"id": "resp_fake", "status": "completed", "usage": usage},
    }
    return _sse("response.completed", done) + b"0\r\n\r\n"


async def stream(
    writer: asyncio.StreamWriter, body: dict[str, object], a: argparse.Namespace, path: str = ""
) -> None:
    n = int(body.get("max_tokens") or body.get("max_output_tokens") or 16)  # type: ignore[call-overload]
    prompt = body.get("prompt", "")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    await writer.drain()
    t0 = time.perf_counter()
    if path == "/v1/messages":
        writer.write(
            _sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {"id": "msg_fake", "usage": {"input_tokens": 16, "output_tokens": 0}},
                },
            )
        )
    elif path == "/v1/responses":
        writer.write(
            _sse(
                "response.created",
                {"type": "response.created", "response": {"id": "resp_fake", "usage": None}},
            )
        )

    def event(obj: object) -> bytes:
        data = b"data: " + json.dumps(obj).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    for i in range(n):
        due = t0 + (a.ttft_ms + i * a.itl_ms) / 1000.0
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        fin = "length" if i == n - 1 else None
        writer.write(_token_event(path, i, fin, t0))
        await writer.drain()
    if path in ("/v1/messages", "/v1/responses"):
        writer.write(_tail(path, n))
        await writer.drain()
        return
    ptoks = len(prompt.split()) if isinstance(prompt, str) else len(prompt)
    usage = {"prompt_tokens": ptoks, "completion_tokens": n, "total_tokens": ptoks + n}
    writer.write(event({"id": "x", "choices": [], "usage": usage}))
    writer.write(b"%x\r\n%s\r\n" % (len(b"data: [DONE]\n\n"), b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def report(every: float) -> None:
    t0 = time.monotonic()
    while True:
        await asyncio.sleep(every)
        print(
            f"t={time.monotonic() - t0:.0f}s streams={STATS['streams']} max={STATS['max_streams']} "
            f"served={STATS['served']}",
            flush=True,
        )


async def main(a: argparse.Namespace) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, a), "127.0.0.1", a.port)
    if a.stats_every:
        asyncio.get_running_loop().create_task(report(a.stats_every))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=8199)
    p.add_argument("--model", default="fake-paced")
    p.add_argument("--ttft-ms", type=float, default=40.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--stats-every", type=float, default=0.0, help="print the stream count every S s")
    asyncio.run(main(p.parse_args()))
