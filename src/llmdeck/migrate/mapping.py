"""An Ollama model -> the vLLM build in llmdeck's catalog (``ollama:`` names of each entry).

Ollama serves GGUF files quantized for llama.cpp (Q4_K_M, Q8_0, ...), which vLLM does not load for
these models; vLLM runs the family's safetensors builds. The GGUF's precision picks the build: a 4-
or 5-bit GGUF -> NVFP4 (Blackwell only: compute capability 10+), else AWQ, else FP8; Q8/Q6 -> FP8;
F16/BF16 -> the unquantized weights; gpt-oss's MXFP4 stays MXFP4. The first available one wins,
the others are listed as alternatives.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from llmdeck.catalog.entries import Catalog, CatalogEntry
from llmdeck.migrate.ollama_api import OllamaModelInfo, canonical

_LOW_BIT = ("nvfp4", "awq", "fp8", "mxfp4", None)
_EIGHT_BIT = ("fp8", None, "mxfp4", "nvfp4", "awq")
_FULL = (None, "fp8", "mxfp4", "nvfp4", "awq")


class Mapping(BaseModel):
    """Where one Ollama model goes: a catalog entry, or why none."""

    ollama: OllamaModelInfo
    entry: CatalogEntry | None = None
    alternatives: list[str] = Field(default_factory=list, description="Other builds of the same model.")
    why: str = Field("", description="Why this build (or why there is none).")


def preference(quantization_level: str | None) -> tuple[str | None, ...]:
    q = (quantization_level or "").upper()
    if q.startswith(("Q8", "Q6")):
        return _EIGHT_BIT
    if q.startswith(("F16", "BF16", "F32")):
        return _FULL
    if q.startswith("MXFP4"):
        return ("mxfp4", *_LOW_BIT[:-2], None)
    return _LOW_BIT  # Q4_*, Q5_*, Q3_*, Q2_*, IQ*, and an unknown level (Ollama's default is Q4_K_M)


def _usable(entry: CatalogEntry, compute_capability: int | None) -> bool:
    if entry.quantization == "nvfp4":
        return compute_capability is not None and compute_capability >= 10
    return True


def map_model(info: OllamaModelInfo, catalog: Catalog, compute_capability: int | None) -> Mapping:
    """The catalog build for ``info`` on a GPU of ``compute_capability`` (None: unknown)."""
    key = canonical(info.name)
    candidates = [e for e in catalog.models if key in {canonical(n) for n in e.ollama}]
    if not candidates:
        return Mapping(
            ollama=info,
            why=f"no catalog entry lists the Ollama model {key!r} (family {info.family or '?'}, "
            f"{info.parameter_size or '?'} parameters); add one to a catalog of your own "
            "(LLMDECK_CATALOG_PATHS) with `ollama: [{key}]`".replace("{key}", key)
            + (f"; Ollama's /api/show gave nothing for it: {info.show_error}" if info.show_error else ""),
        )
    if "vision" in info.capabilities and not any(e.multimodal for e in candidates):
        return Mapping(
            ollama=info,
            why="Ollama runs it with vision; the catalog's vLLM builds of it are text-only",
        )
    usable = [e for e in candidates if _usable(e, compute_capability)] or candidates
    order = preference(info.quantization_level)
    usable.sort(key=lambda e: order.index(e.quantization) if e.quantization in order else len(order))
    pick = usable[0]
    skipped = [e.name for e in candidates if e not in usable]
    why = (
        f"Ollama's GGUF is {info.quantization_level or 'of unknown precision'}: {pick.quantization or 'bf16'}"
    )
    if skipped:
        why += f" ({', '.join(skipped)} need compute capability 10+: NVFP4)"
    return Mapping(
        ollama=info, entry=pick, alternatives=[e.name for e in candidates if e is not pick], why=why
    )
