"""A CPU vLLM server of the tiny model for a test module or the session (the real engine, no mock)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


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
