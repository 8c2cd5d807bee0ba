"""A Responses stream the backend breaks ends as OpenAI's API ends a failed one: ``error``, then
``response.failed`` whose response has ``status: "failed"`` and the error, each numbered after the last
event relayed. Codex 0.171.0 ends a stream only at ``response.completed`` or ``response.failed``; after a
bare ``error`` it retried five times on "stream closed before response.completed" and never showed why
(evidence/gateway/codex_cut.py). The stream replayed is a real one of vLLM 0.32 (the tiny CPU Qwen3)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from gateway_fakes import UvicornThread, fake_cut_stream_server
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.surfaces import ResponsesTrail, stream_error_event
from llmdeck.settings import Settings
from repo_paths import ROOT

STREAM = (ROOT / "tests" / "fixtures" / "gateway" / "vllm-0.32-responses-stream.sse").read_bytes()
FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 2, response_s: 2, idle_s: 3}\n"
    "health: {interval_s: 60, timeout_s: 0.5}\n"
)


def events(text: bytes) -> list[dict[str, object]]:
    out = []
    for block in text.split(b"\n\n"):
        data = [ln[5:] for ln in block.splitlines() if ln.startswith(b"data:")]
        if data:
            out.append(json.loads(b"".join(data)))
    return out


def head(n: int) -> bytes:
    return b"".join(block + b"\n\n" for block in STREAM.split(b"\n\n")[:n])


def test_a_cut_responses_stream_ends_in_response_failed_numbered_after_the_last_event(tmp_path: Path) -> None:
    with fake_cut_stream_server(head(6)) as url:
        text = f"routes:\n  - model: a\n    backends: ['{url}']\n{FAST}"
        loaded = parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path / "s"))
        with UvicornThread(build_app(loaded)) as gw:
            body = {"model": "a", "input": "Say hi.", "stream": True}
            with httpx.stream("POST", f"{gw.url}/v1/responses", json=body, timeout=10) as r:
                got = events(r.read())
    relayed, (error, failed) = got[:-2], got[-2:]
    assert [e["type"] for e in relayed] == [e["type"] for e in events(head(6))]
    assert error["type"] == "error" and error["code"] == "stream_broken"
    assert failed["type"] == "response.failed"
    assert (error["sequence_number"], failed["sequence_number"]) == (6, 7)  # the backend's ran 0..5
    response = failed["response"]
    assert isinstance(response, dict)
    assert response["id"] == events(STREAM)[0]["response"]["id"]  # type: ignore[index]
    assert response["status"] == "failed" and response["model"] == "tiny-qwen3"
    assert response["error"] == {"code": "server_error", "message": error["message"]}
    assert "The backend stopped mid-stream" in str(error["message"])


def test_a_stream_cut_before_response_created_still_fails_a_response() -> None:
    got = events(stream_error_event("responses", "gone", ResponsesTrail()))
    assert [e["type"] for e in got] == ["error", "response.failed"]
    assert [e["sequence_number"] for e in got] == [0, 1]
    response = got[1]["response"]
    assert isinstance(response, dict)
    assert str(response["id"]).startswith("resp_") and response["status"] == "failed"
    assert response["error"] == {"code": "server_error", "message": "gone"}


def test_the_trail_reads_events_split_anywhere_and_ignores_numbers_inside_text() -> None:
    trail = ResponsesTrail()
    delta = {"type": "response.output_text.delta", "delta": '"sequence_number": 99', "sequence_number": 3}
    fake_text = b"data: " + json.dumps(delta).encode() + b"\n\n"
    for block in (head(2), fake_text):
        trail.feed(block)
    assert trail.last_seq == 3
    assert trail.response is not None and trail.response["status"] == "in_progress"
