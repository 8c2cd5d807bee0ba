"""vLLM 0.22's /v1/messages answers the refusals of its validation (a cap over the context, a cap that
leaves the prompt no room, a prompt over the context) with a 500 ``internal_error``, and says a cap over
the context as "max_model_len=max_total_tokens=32768" (measured on an H100: evidence/device/outcap,
Qwen3-Coder-30B-A3B's shape, --max-model-len 32768, Claude Code 2.1.332's recorded request). The gateway
takes such a 500 for the 400 it is: the cap fitted to the prompt's room (roomcap), the overflow relayed
as a 400 ``invalid_request_error``. Before: every such request a 500, which the SDKs retry (Claude Code
up to 10 times) and on which Claude Code does not compact.

The upstream is a FAKE (no engine) with vLLM 0.22's rules, answering with its real bodies (tests/fixtures/
gateway/vllm-0.22-*; the count reply has the shape of vLLM 0.31's real one, its number the prompt's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.outcap import client_error
from llmdeck.settings import Settings
from repo_paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "gateway"
CONTEXT = 32768
PROMPT = 11752  # Claude Code's recorded prompt, about
ASK = 32000
FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 5, response_s: 5, idle_s: 5}\n"
    "health: {interval_s: 60, timeout_s: 1}\n"
)


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


OVER = _fixture("vllm-0.22-messages-500-max-tokens.json")  # cap 40768 over 32768
RESERVED = _fixture("vllm-0.22-messages-500-reserved.json")  # cap 32000: "at least 769 input tokens"
NO_ROOM = _fixture("vllm-0.22-messages-500-reserved-chars.json")  # cap 32768: "more than 0 characters"
TOO_LONG = _fixture("vllm-0.22-messages-500-too-long.json")  # cap 32000, 226421 characters
CRASH = b'{"type":"error","error":{"type":"internal_error","message":"CUDA error: an illegal memory access"}}'
COUNT_OVER = json.dumps(  # count_tokens refuses a prompt over the context: its router's 500, 0.31's words
    {"type": "error", "error": {"type": "internal_error", "message": json.loads(
        _fixture("vllm-0.31-messages-count-tokens-20k.json"))["error"]["message"].replace("16384", "32768")}}
).encode()  # fmt: skip


class FakeVllm022:
    """A FAKE upstream with vLLM 0.22's rules for the output cap on /v1/messages."""

    def __init__(self, probed: bool = True) -> None:
        self.caps: list[int] = []
        self.counted = 0
        self.probed = probed
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                Route("/v1/messages", self._answer, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        model: dict[str, Any] = {"id": "coder-30b"}
        if self.probed:
            model["max_model_len"] = CONTEXT
        return JSONResponse({"object": "list", "data": [model]})

    async def _count(self, request: Request) -> Response:
        self.counted += 1
        if "HUGE" in json.dumps((await request.json())["messages"]):
            return Response(COUNT_OVER, 500, media_type="application/json")
        return JSONResponse({"input_tokens": PROMPT, "context_management": {"original_input_tokens": PROMPT}})

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        cap = int(body["max_tokens"])
        self.caps.append(cap)
        if "CRASH" in json.dumps(body["messages"]):
            return Response(CRASH, 500, media_type="application/json")
        huge = "HUGE" in json.dumps(body["messages"])
        refusal = OVER if cap > CONTEXT else NO_ROOM if cap == CONTEXT else TOO_LONG if huge else None
        if refusal is None and cap + PROMPT > CONTEXT:
            refusal = RESERVED
        if refusal is not None:
            return Response(refusal, 500, media_type="application/json")
        return JSONResponse({"type": "message", "content": [], "usage": {"output_tokens": 1}, "cap": cap})


def _gateway(tmp_path: Path, fake: FakeVllm022) -> Iterator[str]:
    with UvicornThread(fake.app) as up:
        text = f"routes:\n  - model: coder\n    backends: ['{up.url}']\n{FAST}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            yield gw.url


@pytest.fixture()
def fake() -> FakeVllm022:
    return FakeVllm022()


@pytest.fixture()
def url(tmp_path: Path, fake: FakeVllm022) -> Iterator[str]:
    yield from _gateway(tmp_path, fake)


def _post(url: str, cap: int, content: str = "Say hi.") -> httpx.Response:
    body = {"model": "coder", "max_tokens": cap, "messages": [{"role": "user", "content": content}]}
    return httpx.post(url + "/v1/messages", json=body, timeout=10)


def test_claude_codes_cap_is_fitted_to_the_room_its_prompt_leaves(url: str, fake: FakeVllm022) -> None:
    r = _post(url, ASK)
    assert r.status_code == 200, r.text
    assert r.headers["x-llmdeck-max-tokens-lowered"] == f"{ASK}->{CONTEXT - PROMPT}"
    assert fake.caps == [ASK, CONTEXT - PROMPT] and fake.counted == 1


def test_a_cap_over_the_context_is_lowered_then_fitted(url: str, fake: FakeVllm022) -> None:
    r = _post(url, CONTEXT + 8000)
    assert r.status_code == 200, r.text
    assert fake.caps == [CONTEXT, CONTEXT - PROMPT]  # lowered up front (probed), no room, counted, fitted


def test_an_unprobed_backend_names_its_context_in_0_22s_words(tmp_path: Path) -> None:
    """ "max_model_len=max_total_tokens=32768": the number read, the cap lowered, then fitted."""
    fake = FakeVllm022(probed=False)
    for url in _gateway(tmp_path, fake):
        r = _post(url, CONTEXT + 8000)
        assert r.status_code == 200, r.text
        assert fake.caps == [CONTEXT + 8000, CONTEXT, CONTEXT - PROMPT]


def test_a_prompt_over_the_context_is_a_400_with_vllms_words(url: str, fake: FakeVllm022) -> None:
    """Claude Code compacts on "maximum context length" in a 400; a 500 it retried."""
    r = _post(url, ASK, "HUGE")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == json.loads(TOO_LONG)["error"]["message"]
    assert fake.caps == [ASK] and fake.counted == 1


def test_any_other_500_is_relayed_as_it_came(url: str, fake: FakeVllm022) -> None:
    r = _post(url, 100, "CRASH")
    assert r.status_code == 500 and r.content == CRASH and fake.counted == 0


def test_only_vllms_refusals_on_messages_are_taken_for_400s() -> None:
    assert client_error("messages", 500, RESERVED) is not None
    assert client_error("messages", 500, OVER) is not None
    other = b'{"type":"error","error":{"type":"internal_error","message":"CUDA error: out of memory"}}'
    assert client_error("messages", 500, other) is None
    assert client_error("chat", 500, RESERVED) is None  # 0.22's OpenAI APIs answer 400 themselves
    assert client_error("messages", 400, RESERVED) is None
    assert client_error("messages", 500, b"not json") is None
