"""A CPU vLLM server of the tiny model for a test module or the session (the real engine, no mock)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The flags the real agent clients need (tool calls, reasoning), for conftest's agent_server and
# capped_server.
AGENT_FLAGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"]
CAPPED_CONTEXT = 32768  # base prompt and tools: Claude Code 2.1.332 ~12k tokens, codex ~9k, opencode ~12k
# vLLM's server-wide output cap (max_new_tokens in the generation config caps every request's
# max_tokens): the random model never stops on its own, and connect's 4,096-token output limit at
# the CPU engine's pace made one opencode reply take minutes (and trip its compaction). The prompts
# stay the clients' real ones.
OUTPUT_CAP = ["--override-generation-config", '{"max_new_tokens": 48}']


@contextlib.contextmanager
def cpu_engine(settings: object, name: str, model_dir: Path, vllm_args: list[str]) -> Iterator[Any]:
    """One CPU vLLM server of the tiny model for a module or the session; stopped afterwards."""
    if os.environ.get("LLMDECK_SKIP_INTEGRATION"):
        pytest.skip("LLMDECK_SKIP_INTEGRATION is set")
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.service import UpOptions, down, up
    from llmdeck.util.net import free_port

    spec = LaunchSpec(
        name=name, engine="cpu", model=str(model_dir), served_model_name="tiny-qwen3", port=free_port(),
        vllm_args=vllm_args,
    )  # fmt: skip
    record = up(spec, settings, UpOptions.bare(timeout_s=600))  # type: ignore[arg-type]
    try:
        yield record
    finally:
        with contextlib.suppress(Exception):
            down(record.name, settings)  # type: ignore[arg-type]
