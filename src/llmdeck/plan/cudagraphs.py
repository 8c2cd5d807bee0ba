"""The CUDA-graph settings a user can give vLLM, read from its flags.

``--compilation-config`` (JSON: ``cudagraph_mode``, ``cudagraph_capture_sizes``,
``max_cudagraph_capture_size``), ``--cudagraph-capture-sizes 1 2 4``, ``--max-cudagraph-capture-size N``
and ``-O0`` (no compilation, no graphs): vLLM 0.22.0-0.26.0 config/vllm.py and config/compilation.py.
The plan sizes vLLM's CUDA-graph estimate from them (plan/memory.py cudagraph_captures).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError
from llmdeck.plan.flags import VllmFlags


class CudaGraphSettings(BaseModel):
    enabled: bool = Field(True, description="False for cudagraph_mode NONE, -O0 or --enforce-eager")
    sizes: list[int] | None = Field(None, description="the capture sizes the user listed")
    max_size: int | None = Field(None, description="the largest capture size the user set")


def _ints(values: Any, where: str) -> list[int]:
    items = values if isinstance(values, list) else [values]
    try:
        out = [int(str(x)) for x in items]
    except ValueError:
        out = []
    if not out or any(x < 1 for x in out):
        raise UsageError(
            f"{where} must list whole numbers of 1 or more, not {values!r}.",
            hint="Write e.g. --cudagraph-capture-sizes 1 2 4 8 16.",
        )
    return out


def cudagraph_settings(flags: VllmFlags) -> CudaGraphSettings:
    """What the flags say about CUDA graphs (``--enforce-eager`` is read by the planner itself)."""
    cc = flags.get_json("compilation-config")
    cc = cc if isinstance(cc, dict) else {}
    mode = str(cc.get("cudagraph_mode", "")).upper()
    level = flags.values.get("optimization-level")
    enabled = mode not in {"NONE", "0"} and str(level).strip() != "0"
    sizes: list[int] | None = None
    raw_sizes = flags.values.get("cudagraph-capture-sizes")
    if isinstance(raw_sizes, str):
        sizes = _ints(
            [raw_sizes, *flags.more.get("cudagraph-capture-sizes", [])], "--cudagraph-capture-sizes"
        )
    elif "cudagraph_capture_sizes" in cc:
        sizes = _ints(cc["cudagraph_capture_sizes"], "cudagraph_capture_sizes in --compilation-config")
    raw_max = flags.values.get("max-cudagraph-capture-size", cc.get("max_cudagraph_capture_size"))
    max_size = _ints(raw_max, "the largest CUDA-graph capture size")[0] if raw_max is not None else None
    return CudaGraphSettings(enabled=enabled, sizes=sizes, max_size=max_size)
