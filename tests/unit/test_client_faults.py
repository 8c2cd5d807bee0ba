"""The streaming client against tiny fake HTTP servers that misbehave on purpose.

Each fake is a raw asyncio TCP server that writes exactly the bytes a test scripts, so the
failure modes (malformed SSE, HTTP errors, a hanging stream, a dropped connection) are exact.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from llmdeck.client import (
    ConnectionDroppedError,
    HTTPStatusError,
    MalformedStreamError,
    OpenAIClient,
    ServerUnreachableError,
    StreamErrorEvent,
    StreamResult,
    StreamTimeoutError,
    Timeouts,
)
from llmdeck.errors import EndpointError
from llmdeck.util.net import free_port

Step = tuple[bytes, float]  # bytes to write, then seconds to sleep


class FakeScriptedHTTPServer:
    """Answers every request with a scripted sequence of raw writes (then closes or hangs)."""

    def __init__(self, steps: list[Step], *, hang_after: bool = False) -> None:
        self.steps = steps
        self.hang_after = hang_after
        self.requests: list[dict[str, Any]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await reader.readexactly(length) if length else b""
        self.requests.append({"head": head.decode(), "body": json.loads(body) if body else None})
        try:
            for data, delay in self.steps:
                writer.write(data)
                await writer.drain()
                if delay:
                    await asyncio.sleep(delay)
            if self.hang_after:
                await asyncio.sleep(3600)
        finally:
            writer.close()

    async def __aenter__(self) -> FakeScriptedHTTPServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding chunk."""
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def sse(obj: Any) -> bytes:
    return chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")


def comp(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


USAGE = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
END = chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coro())  # type: ignore[arg-type]


def test_good_completion_stream_timing_usage_and_request_body() -> None:
    async def main() -> tuple[StreamResult, dict[str, Any]]:
        steps: list[Step] = [(SSE_HEAD, 0), (sse(comp("a")), 0.05), (sse(comp("b")), 0.05)]
        steps += [(sse(comp("c", "length")), 0), (sse(USAGE), 0), (END, 0)]
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url, api_key="sk-test") as c:
            res = await c.stream_completion("m", "hello", max_tokens=3, ignore_eos=True)
            return res, srv.requests[0]

    res, req = run(main)
    assert res.text == "abc"
    assert res.num_chunks == 3
    assert res.prompt_tokens == 7 and res.completion_tokens == 3
    assert res.finish_reason == "length" and res.done
    assert len(res.itl) == 2 and all(g >= 0.04 for g in res.itl)
    assert res.latency == pytest.approx(res.ttft + sum(res.itl))
    body = req["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["max_tokens"] == 3
    assert "authorization: bearer sk-test" in req["head"].lower()


def test_chat_stream_splits_content_reasoning_tool_calls_and_skips_role_chunk() -> None:
    tc1 = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"pa'}}]
    tc2 = [{"index": 0, "function": {"arguments": 'th": "."}'}}]
    events = [
        delta({"role": "assistant", "content": ""}),
        delta({"reasoning": "think "}),
        delta({"reasoning_content": "more"}),
        delta({"content": "Hi"}),
        delta({"tool_calls": tc1}),
        delta({"tool_calls": tc2}, "tool_calls"),
        USAGE,
    ]
    # one event split across two TCP writes, and CRLF line endings in another
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events[:3])
    steps: list[Step] = [(SSE_HEAD, 0), (chunk(raw[:40]), 0.02), (chunk(raw[40:]), 0)]
    steps += [(chunk(b"data: " + json.dumps(events[3]).encode() + b"\r\n\r\n"), 0)]
    steps += [(chunk(b": keep-alive comment\n\n"), 0)]
    steps += [(sse(e), 0) for e in events[4:]] + [(END, 0)]

    async def main() -> StreamResult:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            return await c.stream_chat("m", [{"role": "user", "content": "x"}], max_tokens=8)

    res = run(main)
    assert res.reasoning == "think more"
    assert res.text == "Hi"
    assert res.tool_calls == [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
    ]
    assert res.finish_reason == "tool_calls"
    assert res.num_chunks == 5  # the role-only chunk is not a token chunk
    assert res.completion_tokens == 3


def test_malformed_sse_raises_typed_error() -> None:
    steps: list[Step] = [(SSE_HEAD, 0), (sse(comp("a")), 0), (chunk(b"data: {not json\n\n"), 0), (END, 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_completion("m", "p", max_tokens=4)

    with pytest.raises(MalformedStreamError) as info:
        run(main)
    assert isinstance(info.value, EndpointError) and info.value.exit_code == 1
    assert info.value.kind == "malformed"
    assert info.value.partial is not None and info.value.partial.num_chunks == 1
    assert "(not valid JSON)" in info.value.message and "JSONDecodeError" not in info.value.message


# Events that are JSON but not an OpenAI chunk: each fails its request, said in words (no Python type
# names); before, a wrong-typed usage or text slipped through and the bench lost the request silently.
WRONG_SHAPES = [
    ("usage-string", {"choices": [], "usage": "lots"}, "usage is not an object"),
    ("usage-text-count", {"choices": [], "usage": {"prompt_tokens": "x"}}, "usage.prompt_tokens"),
    ("usage-negative", {"choices": [], "usage": {"completion_tokens": -5}}, "usage.completion_tokens"),
    ("usage-float", {"choices": [], "usage": {"prompt_tokens": 8.5}}, "usage.prompt_tokens"),
    ("usage-huge", {"choices": [], "usage": {"completion_tokens": 10**30}}, "usage.completion_tokens"),
    ("choices-object", {"choices": {"a": 1}}, "choices is not a list"),
    ("choice-string", {"choices": ["x"]}, "choices[0] is not an object"),
    ("text-number", {"choices": [{"index": 0, "text": 5}]}, "choices[0].text is not a string"),
    ("event-list", [1, 2], "not a JSON object"),
]


@pytest.mark.parametrize(
    ("event", "says"), [(e, s) for _, e, s in WRONG_SHAPES], ids=[i for i, _, _ in WRONG_SHAPES]
)
def test_a_wrong_shaped_event_is_malformed_said_in_words(event: Any, says: str) -> None:
    steps: list[Step] = [(SSE_HEAD, 0), (sse(comp("a")), 0), (sse(event), 0), (END, 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_completion("m", "p", max_tokens=4)

    with pytest.raises(MalformedStreamError) as info:
        run(main)
    assert says in info.value.message and "Error" not in info.value.message


@pytest.mark.parametrize(
    ("event", "says"),
    [
        (delta({"content": 5}), "delta.content is not a string"),
        ({"choices": [{"index": 0, "delta": "oops"}]}, "choices[0].delta is not an object"),
        (delta({"tool_calls": ["x"]}), "not shaped like an OpenAI chunk"),
    ],
)
def test_a_wrong_shaped_chat_event_is_malformed_said_in_words(event: Any, says: str) -> None:
    steps: list[Step] = [(SSE_HEAD, 0), (sse(event), 0), (END, 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_chat("m", [{"role": "user", "content": "hi"}], max_tokens=4)

    with pytest.raises(MalformedStreamError) as info:
        run(main)
    assert says in info.value.message and "Error" not in info.value.message


def test_error_event_inside_stream() -> None:
    err = {"error": {"message": "out of KV cache", "type": "InternalServerError"}}
    steps: list[Step] = [(SSE_HEAD, 0), (sse(err), 0), (END, 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_completion("m", "p", max_tokens=4)

    with pytest.raises(StreamErrorEvent, match="out of KV cache"):
        run(main)


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_http_4xx_5xx_carry_status_and_body(status: int) -> None:
    body = json.dumps({"error": {"message": f"boom {status}"}}).encode()
    head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    steps: list[Step] = [(head.encode() + body, 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_chat("m", [{"role": "user", "content": "x"}], max_tokens=4)

    with pytest.raises(HTTPStatusError) as info:
        run(main)
    assert info.value.status == status
    assert f"boom {status}" in info.value.body
    assert str(status) in info.value.message


def test_hanging_stream_hits_read_timeout() -> None:
    steps: list[Step] = [(SSE_HEAD, 0), (sse(comp("a")), 0)]

    async def main() -> None:
        async with (
            FakeScriptedHTTPServer(steps, hang_after=True) as srv,
            OpenAIClient(srv.url, timeouts=Timeouts(connect=2, read=0.5)) as c,
        ):
            await c.stream_completion("m", "p", max_tokens=4)

    t = time.monotonic()
    with pytest.raises(StreamTimeoutError) as info:
        run(main)
    assert info.value.which == "read"
    assert time.monotonic() - t < 5
    assert info.value.partial is not None and info.value.partial.num_chunks == 1


def test_slow_trickle_hits_total_timeout() -> None:
    steps: list[Step] = [(SSE_HEAD, 0)] + [(sse(comp("a")), 0.2) for _ in range(30)]

    async def main() -> None:
        async with (
            FakeScriptedHTTPServer(steps) as srv,
            OpenAIClient(srv.url, timeouts=Timeouts(connect=2, read=5, total=0.8)) as c,
        ):
            await c.stream_completion("m", "p", max_tokens=40)

    with pytest.raises(StreamTimeoutError) as info:
        run(main)
    assert info.value.which == "total"


def test_dropped_connection_mid_stream() -> None:
    # chunked body cut off: no terminating chunk, no [DONE]
    steps: list[Step] = [(SSE_HEAD, 0), (sse(comp("a")), 0), (sse(comp("b")), 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_completion("m", "p", max_tokens=4)

    with pytest.raises(ConnectionDroppedError) as info:
        run(main)
    assert info.value.partial is not None and info.value.partial.num_chunks == 2


def test_stream_ending_cleanly_without_done_or_finish_is_dropped() -> None:
    steps: list[Step] = [(SSE_HEAD, 0), (sse(comp("a")), 0), (b"0\r\n\r\n", 0)]

    async def main() -> None:
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await c.stream_completion("m", "p", max_tokens=4)

    with pytest.raises(ConnectionDroppedError):
        run(main)


def test_connection_refused_is_unreachable() -> None:
    port = free_port()

    async def main() -> None:
        async with OpenAIClient(f"http://127.0.0.1:{port}", timeouts=Timeouts(connect=2)) as c:
            await c.stream_completion("m", "p", max_tokens=4)

    with pytest.raises(ServerUnreachableError) as info:
        run(main)
    assert info.value.kind == "unreachable" and info.value.hint


def test_bench_sends_the_sampling_flags_in_every_request_body() -> None:
    """`llmdeck bench --temperature 0 --top-k 20`: both endpoints carry them; unset ones are not sent
    (the server's default applies, as with `vllm bench serve` without --temperature)."""
    from llmdeck.bench.load import ScenarioRun
    from llmdeck.bench.result_schema import ScenarioSpec
    from llmdeck.bench.workloads import WorkItem

    async def main(spec: ScenarioSpec, chat: bool) -> list[dict[str, Any]]:
        if chat:
            steps: list[Step] = [(SSE_HEAD, 0), (sse(delta({"content": "a"}, "length")), 0)]
            msgs = [{"role": "user", "content": "x"}]
            items = [WorkItem(index=i, output_len=1, messages=msgs) for i in range(2)]
        else:
            steps = [(SSE_HEAD, 0), (sse(comp("a", "length")), 0)]
            items = [WorkItem(index=i, output_len=1, prompt="x") for i in range(2)]
        steps += [(sse(USAGE), 0), (END, 0)]
        async with FakeScriptedHTTPServer(steps) as srv, OpenAIClient(srv.url) as c:
            await ScenarioRun(c, spec, "m", items).run()
            return [r["body"] for r in srv.requests]

    greedy = ScenarioSpec(name="t", num_prompts=2, temperature=0.0, top_k=20)
    for chat in (False, True):
        bodies = run(lambda chat=chat: main(greedy, chat))  # type: ignore[misc]
        assert len(bodies) == 2
        assert all(b["temperature"] == 0.0 and b["top_k"] == 20 and "top_p" not in b for b in bodies)
    plain = run(lambda: main(ScenarioSpec(name="t", num_prompts=2), False))
    assert all("temperature" not in b and "top_k" not in b for b in plain)
    assert greedy.label().endswith("T=0") and greedy.sampling() == {"temperature": 0.0, "top_k": 20}


@pytest.mark.parametrize("value", [-5, 0, "lots", 4096.5, True, 10**30, float("inf"), [4096]])
def test_an_impossible_max_model_len_is_a_bad_reply(value: object) -> None:
    """-5, 0, "lots", true...: named (field and value) as a bad reply, exit 1, not taken as a length."""
    from llmdeck.client.errors import reported_max_model_len

    with pytest.raises(MalformedStreamError, match="reports max_model_len") as info:
        reported_max_model_len({"id": "m", "max_model_len": value}, "http://h/v1/models")
    assert info.value.exit_code == 1


def test_a_missing_max_model_len_is_not_reported() -> None:
    from llmdeck.client.errors import reported_max_model_len

    assert reported_max_model_len({"id": "m"}, "u") is None
    assert reported_max_model_len({"id": "m", "max_model_len": None}, "u") is None
    assert reported_max_model_len({"id": "m", "max_model_len": 131072}, "u") == 131072


def test_llamacpp_servers_slot_context_is_its_max_model_len() -> None:
    """llama.cpp's server reports no max_model_len but ``meta.n_ctx`` (its slot's context; the real page
    in tests/fixtures/llamacpp/); 0 there (a model its router has not loaded) is no length, an impossible
    one is named as meta.n_ctx, and vLLM's own field wins where both stand."""
    import json

    from llmdeck.client.errors import reported_max_model_len
    from repo_paths import ROOT

    page = json.loads((ROOT / "tests/fixtures/llamacpp/models.json").read_text())
    assert reported_max_model_len(page["data"][0], "u") == 4096
    assert reported_max_model_len({"id": "m", "meta": {"n_ctx": 0}}, "u") is None
    assert reported_max_model_len({"id": "m", "meta": "x"}, "u") is None
    assert reported_max_model_len({"id": "m", "max_model_len": 8192, "meta": {"n_ctx": 4096}}, "u") == 8192
    with pytest.raises(MalformedStreamError, match=r'reports meta\.n_ctx "lots"'):
        reported_max_model_len({"id": "m", "meta": {"n_ctx": "lots"}}, "http://h/v1/models")


@pytest.mark.parametrize(
    ("exc", "says"),
    [
        (httpx.RemoteProtocolError(""), "dropped mid-response (the server closed the connection or broke"),
        (httpx.ReadError(""), "dropped mid-response (the connection failed while the reply was read)"),
        (httpx.TooManyRedirects(""), "failed: too many redirects."),
        (httpx.DecodingError(""), "failed: the reply could not be decoded."),
        (httpx.ConnectError(""), "Cannot connect to http://h/v1 (connection refused)."),
    ],
    ids=["protocol", "read", "redirects", "decoding", "connect"],
)
def test_an_httpx_error_with_no_text_is_said_in_words(exc: Exception, says: str) -> None:
    """`{exc or type(exc).__name__}` never fell back (an exception is always true): an httpx error with an
    empty message had printed "()" or "failed: ."; now its kind is said in words, never its class name."""
    from llmdeck.client.httpmap import _map_httpx_errors

    with pytest.raises(EndpointError) as info, _map_httpx_errors("http://h/v1"):
        raise exc
    message = info.value.message
    assert says in message and "()" not in message and ": ." not in message, message
    assert type(exc).__name__ not in message
