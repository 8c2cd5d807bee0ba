"""runtime/warmup.py: against the real CPU vLLM servers, plus the arithmetic of the report."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from llmdeck.runtime.warmup import (
    WarmupReport,
    WarmupRequest,
    _summarise,
    default_lengths,
    make_prompt,
    warmup,
)


def test_default_lengths_stay_under_max_model_len() -> None:
    assert default_lengths(4096, 16) == [64, 512, 2048, 4016]
    assert default_lengths(131072, 16) == [64, 512, 2048, 8192, 32768]
    assert default_lengths(40960, 16) == [64, 512, 2048, 8192, 32768]
    assert default_lengths(2048, 16) == [64, 512, 1968]
    assert max(default_lengths(300, 16)) <= 300 - 16


def test_prompts_are_unique_and_sized() -> None:
    a, b = make_prompt(512, "aaaa"), make_prompt(512, "bbbb")
    assert a != b and a.startswith("Request aaaa.")
    assert 400 < len(a.split()) < 512  # ~0.85 words per token target, so the prompt stays under the cap


def test_summary_arithmetic() -> None:
    def r(label: str, phase: Any, ttft: float) -> WarmupRequest:
        return WarmupRequest(label=label, phase=phase, stream=True, target_tokens=64, ttft_s=ttft)

    rep = WarmupReport(base_url="http://x", model="m", max_model_len=4096, lengths=[64, 512])
    rep.requests = [
        r("prompt 64", "first", 5.7),
        r("prompt 512", "first", 1.0),
        r("prompt 64", "steady", 0.5),
        r("prompt 64", "steady", 0.6),
        r("prompt 512", "steady", 0.5),
    ]
    _summarise(rep)
    assert rep.first_ttft_s == 5.7 and rep.first_max_ttft_s == 5.7
    assert rep.steady_ttft_median_s == 0.5
    assert rep.per_shape["prompt 64"]["steady_ttft_s"] == pytest.approx(0.55)
    assert rep.slowdown == pytest.approx(5.7 / 0.55)
    assert "10.4x slower" in rep.summary() and "prompt 64" in rep.summary()


@pytest.mark.integration
def test_warmup_against_the_cpu_server(cpu_server: Any) -> None:
    report = asyncio.run(
        warmup(
            cpu_server.base_url,
            cpu_server.served_model_name,
            max_model_len=cpu_server.max_model_len,
            lengths=[64, 512, 1024],
            repeats=2,
            max_tokens=8,
        )
    )
    assert report.failed == [], [r.error for r in report.failed]
    labels = [r.label for r in report.requests if r.phase == "first"]
    assert labels == ["prompt 64", "prompt 512", "prompt 1024", "prompt 64 (no stream)", "tool call"]
    streamed = [
        r for r in report.requests if r.phase == "first" and r.stream and r.label.startswith("prompt")
    ]
    tokens = [r.prompt_tokens for r in streamed]
    assert all(t is not None for t in tokens) and tokens == sorted(tokens)  # usage came back, lengths grow
    assert tokens[-1] is not None and 700 < tokens[-1] <= 1024
    assert sum(1 for r in report.requests if r.phase == "steady") == 6
    assert report.steady_ttft_median_s is not None and report.steady_ttft_median_s > 0
    assert report.slowdown is not None and set(report.per_shape) == {"prompt 64", "prompt 512", "prompt 1024"}
    assert report.server_version  # GET /version
    data = json.loads(report.model_dump_json())
    assert data["schema_version"] == 1 and data["llmdeck_version"]
    assert "TTFT" in report.summary()


@pytest.mark.integration
def test_warmup_on_a_server_without_tool_choice(cpu_server_plain: Any) -> None:
    report = asyncio.run(
        warmup(
            cpu_server_plain.base_url,
            cpu_server_plain.served_model_name,
            max_model_len=cpu_server_plain.max_model_len,
            lengths=[64],
            repeats=1,
            max_tokens=4,
        )
    )
    tool = next(r for r in report.requests if r.label == "tool call")
    assert tool.skipped and not tool.ok and tool.error and tool.error.startswith("HTTP 400")
    assert "--enable-auto-tool-choice" in (tool.note or "")
    assert any(r.label == "tool-shaped prompt (no tools)" and r.ok for r in report.requests)
    assert report.failed == []
