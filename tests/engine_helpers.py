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
    with started_once(settings, name):
        record = running(settings, name) or up(spec, settings, UpOptions.bare(timeout_s=600))  # type: ignore[arg-type]
    try:
        yield record
    finally:
        if not XDIST_WORKER:  # under pytest-xdist another worker may still use it: the controller stops it
            with contextlib.suppress(Exception):
                down(record.name, settings)  # type: ignore[arg-type]


# Under pytest-xdist (`make integration` runs two workers) each worker has its own session, so a
# session server would start once per worker. The workers share one state dir instead (conftest's
# session_settings): the first worker to need a server starts it under a lock, the others wait on the
# lock and then read its record, and the controller stops them all when every worker is done
# (conftest's pytest_sessionfinish).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def started_once(settings: object, key: str) -> contextlib.AbstractContextManager[None]:
    """Held while session server(s) ``key`` start, so that one worker of the run starts them."""
    from llmdeck.util.filelock import exclusive

    lock = Path(settings.state_dir) / f"{key}.lock"  # type: ignore[attr-defined]
    return exclusive(lock, timeout_s=1800, what=f"start of the session's {key} server")


def running(settings: object, name: str) -> Any:
    """The record of server ``name`` when another worker of the run started it and it is alive, else None."""
    from llmdeck.gateway.lifecycle import live_in

    return live_in(settings.servers_dir, name)  # type: ignore[attr-defined]
