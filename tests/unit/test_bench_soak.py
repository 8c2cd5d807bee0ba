"""The gateway soak's stream judging (benchmarks/_stream.py) and its in-flight sampling (gateway_soak.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import pytest

from repo_paths import ROOT

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

from _stream import StreamCheck  # noqa: E402

FIXTURES = Path("/work/shared/fixtures/vllm-0.22.0-h200")


def _vllm_like(
    tokens: int, events: int, *, usage: int | None, done: bool = True, finish: bool = True
) -> bytes:
    """A vLLM /v1/completions stream (compact JSON): ``tokens`` tokens merged into ``events`` events."""
    out = []
    for i in range(events):
        fin = '"length"' if finish and i == events - 1 else "null"
        out.append(
            '{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
            f'"text":"t{i}","logprobs":null,"finish_reason":{fin},"stop_reason":null}}]}}'
        )
    if usage is not None:
        u = {"prompt_tokens": 1, "total_tokens": 1 + usage, "completion_tokens": usage}
        out.append(
            '{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":'
            + json.dumps(u, separators=(",", ":"))
            + "}"
        )
    body = b"".join(b"data: " + e.encode() + b"\n\n" for e in out)
    return body + (b"data: [DONE]\n\n" if done else b"")


def _feed(raw: bytes, step: int = 37) -> StreamCheck:
    check = StreamCheck()
    for i in range(0, len(raw), step):  # events split across reads at odd places
        check.feed(raw[i : i + step])
    return check


def test_merged_events_with_the_exact_usage_are_ok() -> None:
    check = _feed(_vllm_like(64, 61, usage=64))
    assert check.outcome(64) == "ok"
    assert check.events == 61  # token events only: not the usage chunk, not [DONE]
    assert check.usage is not None and check.usage["completion_tokens"] == 64


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (_vllm_like(64, 64, usage=64, done=False), "cut"),
        (_vllm_like(64, 64, usage=64, finish=False), "no_finish"),
        (_vllm_like(63, 63, usage=63), "short"),
        (_vllm_like(64, 64, usage=None), "short"),  # asked for usage, none came
    ],
)
def test_incomplete_streams_are_named(raw: bytes, want: str) -> None:
    assert _feed(raw).outcome(64) == want


def test_without_usage_asked_a_finished_stream_is_ok() -> None:
    assert _feed(_vllm_like(64, 50, usage=None)).outcome(None) == "ok"


def test_server_running_reads_vllms_gauge() -> None:
    from gateway_soak import RUNNING

    text = (FIXTURES / "metrics-qwen3-0.6b-after.txt").read_text()
    assert [float(m.group(1)) for m in RUNNING.finditer(text)] == [0.0]


def test_soak_keeps_every_stream_in_flight_at_the_fake_server(tmp_path: Path) -> None:
    """256 workers were ~60 at vLLM on the H200 (httpx's client CPU); here 8 must be 8 at FakePacedServer.

    Each stream lasts ~3 s, longer than the run: every sample falls inside the first round of requests.
    """
    import gateway_soak
    from gateway_overhead import fake_backend

    a = argparse.Namespace(
        ttft_ms=10.0, itl_ms=100.0, concurrency=8, seconds=2.5, max_tokens=30, direct=True, client="lean"
    )
    with fake_backend(a, tmp_path) as (backend, model):
        a.model = model
        gateway_soak.SAMPLE_EVERY_S = 0.5
        out = asyncio.run(gateway_soak.soak(backend, None, backend, a))
    assert out["failed"] == 0 and out["ok"] == 8
    assert out["completion_tokens"] == {"30": out["ok"]}
    # from the first sample with all 8 in flight on (on a loaded machine the client's count lags its
    # first bytes past 0.3 s: a fixed 0.2 s start had failed there), every stream stays in flight
    samples = out["concurrency"]
    start = next((i for i, c in enumerate(samples) if c["client"] == 8), len(samples))
    busy = samples[start:]
    assert len(busy) >= 2 and all(c["client"] == 8 and c["server"] == 8 for c in busy), samples


def test_gateway_keeps_every_stream_open_to_the_fake_server(tmp_path: Path) -> None:
    """Through the gateway (its own process): 16 client streams are 16 at the gateway and the server."""
    import gateway_soak
    from gateway_overhead import fake_backend

    a = argparse.Namespace(
        ttft_ms=10.0, itl_ms=100.0, concurrency=16, seconds=2.5, max_tokens=30, direct=False, client="lean"
    )
    with fake_backend(a, tmp_path) as (backend, model):
        gateway_soak.SAMPLE_EVERY_S = 0.5
        out = gateway_soak.run(backend, model, a, tmp_path)
    assert out["failed"] == 0 and out["completion_tokens"] == {"30": out["ok"]}
    busy = [c for c in out["concurrency"] if c["t"] > 0.2]
    assert busy and all(c["client"] == c["gateway"] == c["server"] == 16 for c in busy)
