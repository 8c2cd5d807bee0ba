"""On a backend known to count the output cap against the prompt's room (vLLM 0.20-0.31), a cap sure to
be refused is counted BEFORE the first send (gateway/roomcap.count_first): one count and one send, not a
send refused, a count and a send again.

The upstream is a FAKE (no engine): test_gateway_roomcap's FakeVllm031, vLLM 0.31's rules and its real
bodies, with a count endpoint that can fail (a 500) or be slow, and a /v1/models entry that can change (a
server started again). Before the fix Claude Code's ``max_tokens: 32000`` paid the refused send on every
request, not only on the first (+61 ms of TTFT on an H100, evidence/device/outcap)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.settings import Settings
from test_gateway_roomcap import ASK, CONTEXT, FAST, FIXTURES, HI, REFUSED, RESERVED, TOKENS, FakeVllm031

# a ~12k-token prompt that weighs what one does (~3.9 bytes a token): FakeVllm031 counts any prompt that
# names LONG as 11752 tokens (vLLM 0.31's count of the 12k prompt, its real reply)
LONG = [{"role": "user", "content": "LONG " + "tokens " * 6500}]
HUGE = [{"role": "user", "content": "HUGE"}]


GONE = {  # vLLM 0.31's 404 for a model it does not serve (the gateway's alias, say), on each count
    "/v1/messages/count_tokens": (FIXTURES / "vllm-0.31-messages-count-tokens-404-model.json").read_bytes(),
    "/tokenize": (FIXTURES / "vllm-0.31-tokenize-404-model.json").read_bytes(),
}


class FakeVllm031Counts(FakeVllm031):
    """A FAKE vLLM 0.31 whose count can fail (a 500) or be slow, and whose /v1/models entry can change;
    its count, as vLLM's, answers 404 for a model it does not serve."""

    def __init__(self) -> None:
        super().__init__()
        self.model_gone = False  # every count answers the model's 404 (its name changed, say)
        self.busy = False  # the APIs answer 503 (overloaded: the gateway tries the next replica)
        self.count_status = 200
        self.count_delay_s = 0.0
        self.root = "/models/tiny-qwen3"
        self.models_asked = 0

    async def _models(self, request: Request) -> Response:
        self.models_asked += 1
        entry = {"id": "tiny-qwen3", "root": self.root, "max_model_len": CONTEXT}
        return JSONResponse({"object": "list", "data": [entry]})

    async def _answer(self, request: Request) -> Response:
        if self.busy:
            return JSONResponse({"error": {"message": "overloaded", "code": 503}}, 503)
        return await super()._answer(request)

    async def _count(self, request: Request) -> Response:
        if self.count_delay_s:
            await asyncio.sleep(self.count_delay_s)
        body = await request.json()
        if self.model_gone or body.get("model") != "tiny-qwen3":
            self.counted.append(body)
            return Response(GONE[request.url.path], 404, media_type="application/json")
        if self.count_status != 200:
            self.counted.append(body)
            return JSONResponse({"error": {"message": "boom", "code": 500}}, self.count_status)
        return await super()._count(request)


@contextlib.contextmanager
def _gateway(tmp_path: Path, fake: FakeVllm031Counts, timeouts: str = FAST) -> Iterator[str]:
    with UvicornThread(fake.app) as up:
        text = f"routes:\n  - model: coder\n    backends: ['{up.url}']\n{timeouts}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            yield gw.url


@pytest.fixture()
def fake() -> FakeVllm031Counts:
    return FakeVllm031Counts()


@pytest.fixture()
def url(tmp_path: Path, fake: FakeVllm031Counts) -> Iterator[str]:
    with _gateway(tmp_path, fake) as gw:
        yield gw


def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json={"model": "coder", **body}, timeout=10)


def _sent(fake: FakeVllm031, before: tuple[int, int]) -> tuple[int, int]:
    """The sends and the counts the backend got since ``before`` (a pair of the same)."""
    return len(fake.caps) - before[0], len(fake.counted) - before[1]


def _mark(fake: FakeVllm031) -> tuple[int, int]:
    return len(fake.caps), len(fake.counted)


@pytest.mark.parametrize(("path", "api"), [("/v1/messages", "messages"), ("/v1/chat/completions", "chat")])
def test_claude_codes_cap_is_counted_before_it_is_sent_once_the_backend_is_known(
    path: str, api: str, fake: FakeVllm031Counts, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """32000 on a 16384 context: sent as 16384, which leaves no room at all (refused whatever the prompt).
    The first request teaches the backend (2 sends, 1 count); each later one is counted first and sent
    once, fitted. Before: 2 sends and a count every time."""
    room = CONTEXT - TOKENS[(api, "hi")]
    with caplog.at_level("INFO", logger="llmdeck.gateway.access"):
        first = _post(url, path, {"max_tokens": ASK, "messages": HI})
        assert first.status_code == 200 and fake.caps == [CONTEXT, room] and len(fake.counted) == 1
        for _ in range(4):
            before = _mark(fake)
            r = _post(url, path, {"max_tokens": ASK, "messages": HI, "stream": True})
            assert r.status_code == 200, r.text
            assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{room}"
            assert _sent(fake, before) == (1, 1) and fake.caps[-1] == room
        _wait(lambda: len([r for r in caplog.records if r.name == "llmdeck.gateway.access"]) == 5)
    lines = [r.getMessage() for r in caplog.records if r.name == "llmdeck.gateway.access"]
    assert all(f" lowered={ASK}->{room} count=fits:" in line for line in lines), lines  # as the first's
    page = httpx.get(url + "/metrics").text  # as for a request counted after its refusal
    assert 'llmdeck_gateway_max_tokens_lowered_total{how="room",route="coder"} 5.0' in page
    assert 'llmdeck_gateway_prompt_counts_total{outcome="fits",route="coder"} 5.0' in page


def test_a_cap_under_the_context_is_counted_first_when_the_prompts_bytes_say_it_cannot_fit(
    fake: FakeVllm031Counts, url: str
) -> None:
    """8000 beside a 12k-token prompt on 16384 (Claude Code's 32000 on a 32768 context, the H100 run): the
    cap alone fits, so only the prompt's floor of tokens (its bytes over the most bytes per token this
    backend counted) says it cannot. A cap that fits beside it, and a short prompt, are sent once,
    uncounted, as before."""
    room = CONTEXT - TOKENS[("messages", "LONG")]
    assert _post(url, "/v1/messages", {"max_tokens": 8000, "messages": LONG}).status_code == 200
    assert fake.caps == [8000, room] and len(fake.counted) == 1  # taught: refused, counted, fitted
    before = _mark(fake)
    r = _post(url, "/v1/messages", {"max_tokens": 8000, "messages": LONG})
    assert r.status_code == 200 and r.headers["x-llmdeck-max-tokens-lowered"] == f"8000->{room}"
    assert _sent(fake, before) == (1, 1) and fake.caps[-1] == room
    for cap, messages in ((4000, LONG), (8000, HI), (100, HI)):  # 4000 + 11752 fits: sent as written
        before = _mark(fake)
        r = _post(url, "/v1/messages", {"max_tokens": cap, "messages": messages})
        assert r.status_code == 200 and "x-llmdeck-max-tokens-lowered" not in r.headers
        assert _sent(fake, before) == (1, 0) and fake.caps[-1] == cap


def test_an_inline_image_does_not_teach_the_bytes_per_token(fake: FakeVllm031Counts, url: str) -> None:
    """A pasted screenshot (Claude Code sends it inline, base64: ~400 kB for some hundreds of tokens) had
    raised the backend's bytes per token to thousands: every text prompt's floor fell to a few tokens, and
    a cap under the context was refused first again, until the backend started again. Now a body with
    inline media is counted (its floor says so) but teaches no ratio; the next long prompt is counted
    first as before the image."""
    room = CONTEXT - TOKENS[("messages", "LONG")]
    assert _post(url, "/v1/messages", {"max_tokens": 8000, "messages": LONG}).status_code == 200  # taught
    png = base64.b64encode(os.urandom(300_000)).decode()  # the bytes a screenshot weighs
    # the FAKE reads a prompt naming LONG or HUGE as such: random base64 held one ~5% of the time
    png = png.replace("LONG", "LoNG").replace("HUGE", "HuGE")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    shot = [{"role": "user", "content": [image, {"type": "text", "text": "Say hi."}]}]
    assert _post(url, "/v1/messages", {"max_tokens": 100, "messages": shot}).status_code == 200
    before = _mark(fake)
    r = _post(url, "/v1/messages", {"max_tokens": 8000, "messages": LONG})
    assert r.status_code == 200 and r.headers["x-llmdeck-max-tokens-lowered"] == f"8000->{room}"
    assert _sent(fake, before) == (1, 1), "refused first: the image's bytes per token hid the floor"


def test_a_prompt_over_the_context_counted_first_gets_vllms_overflow_400_once(
    fake: FakeVllm031Counts, url: str
) -> None:
    """Counted first and over the context: sent as before (the cap as the context) and vLLM's overflow
    400 relayed (Claude Code compacts on it); not counted a second time on that 400. Before: the refused
    send came first, then the count."""
    assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
    before = _mark(fake)
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HUGE})
    assert r.status_code == 400 and r.content == RESERVED[("messages", CONTEXT)]
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT}"
    assert _sent(fake, before) == (1, 1)
    assert [c["messages"] for c in fake.counted[-1:]] == [HUGE]  # the count came first: then the send
    before = _mark(fake)
    assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
    assert _sent(fake, before) == (1, 1)


def test_a_count_that_fails_first_sends_the_request_as_the_client_wrote_it(
    fake: FakeVllm031Counts, url: str
) -> None:
    """The count answers 500: the request goes once as the client wrote it and vLLM's own 400 is relayed
    (today's end: before, it was first sent lowered, refused, counted in vain, then sent as written)."""
    assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
    fake.count_status = 500
    before = _mark(fake)
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI})
    assert r.status_code == 400 and r.content == REFUSED["messages"]
    assert "x-llmdeck-max-tokens-lowered" not in r.headers
    assert _sent(fake, before) == (1, 1) and fake.caps[-1] == ASK


def test_the_count_first_names_the_backends_model_and_a_404_about_the_model_is_no_missing_endpoint(
    fake: FakeVllm031Counts, url: str
) -> None:
    """Counted before the send, the body still had the client's alias ("coder"): vLLM 0.31 answered 404
    "The model `coder` does not exist" (the real CPU server, evidence/gateway/README.md), read as no
    count endpoint: every later cap went as the client wrote it, refused. Now the count names the served
    model; a 404 about the request (an API error, not the router's) is a count that failed, asked again."""
    assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
    fake.model_gone = True
    before = _mark(fake)
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI})
    assert r.status_code == 400 and _sent(fake, before) == (1, 1) and fake.caps[-1] == ASK  # as written
    fake.model_gone = False
    before = _mark(fake)
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI})
    assert r.status_code == 200 and _sent(fake, before) == (1, 1)
    assert fake.counted[-1]["model"] == "tiny-qwen3"


def test_a_count_that_times_out_first_sends_the_request_as_the_client_wrote_it(
    tmp_path: Path, fake: FakeVllm031Counts
) -> None:
    """A count with no answer within the gateway's timeout (1 s here): as for a failed one, and the count
    is waited for once, not twice."""
    quick = FAST.replace("first_byte_s: 5, response_s: 5", "first_byte_s: 1, response_s: 1")
    with _gateway(tmp_path, fake, quick) as url:
        assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
        fake.count_delay_s = 1.5
        before, t0 = _mark(fake), time.monotonic()
        r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI})
        assert r.status_code == 400 and r.content == REFUSED["messages"]
        assert _sent(fake, before) == (1, 0) and fake.caps[-1] == ASK  # the count never answered
        assert time.monotonic() - t0 < 1.9


def test_a_server_started_again_is_learnt_again(tmp_path: Path, fake: FakeVllm031Counts) -> None:
    """Its /v1/models entry changed (server_is): whether it counts the cap, and its bytes per token, are
    learnt again: the next 32000 is refused first, then counted first again."""
    probes = FAST.replace("interval_s: 60", "interval_s: 0.2")
    with _gateway(tmp_path, fake, probes) as url:
        assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
        before = _mark(fake)
        assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
        assert _sent(fake, before) == (1, 1)
        fake.root, asked = "/models/tiny-qwen3-v2", fake.models_asked  # started again (another build)
        _wait(lambda: fake.models_asked >= asked + 2)  # a probe after the change has been answered
        before = _mark(fake)
        assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
        assert _sent(fake, before) == (2, 1)  # refused first: not known to count the cap any more
        before = _mark(fake)
        assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
        assert _sent(fake, before) == (1, 1)


def test_a_count_made_on_a_replica_that_then_failed_is_made_again_on_the_next(tmp_path: Path) -> None:
    """Counted first on replica A, which then answers 503: B is tried with its own count, not A's room (a
    replica may serve another context or tokenizer). Both replicas already known to count the cap."""
    a, b = FakeVllm031Counts(), FakeVllm031Counts()
    with UvicornThread(a.app) as up_a, UvicornThread(b.app) as up_b:
        text = f"routes:\n  - model: coder\n    backends: ['{up_a.url}', '{up_b.url}']\n{FAST}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            for _ in range(2):  # the first to A, the next to B (equal replicas take turns): both learnt
                assert _post(gw.url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
            assert len(a.counted) == len(b.counted) == 1
            a.busy = True
            r = _post(gw.url, "/v1/messages", {"max_tokens": ASK, "messages": HI})
    room = CONTEXT - TOKENS[("messages", "hi")]
    assert r.status_code == 200 and r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{room}"
    assert len(a.counted) == 2 and len(b.counted) == 2  # counted on A, then on B
    assert b.caps[-1] == room


def _wait(done: Any, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)
