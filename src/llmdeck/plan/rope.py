"""The longest context vLLM allows a model: ``max_position_embeddings`` and RoPE scaling.

Follows vllm 0.22.0 ``vllm/config/model.py:2119-2253`` (``_get_and_verify_max_len``) and
``vllm/transformers_utils/model_arch_config_convertor.py:278-311``
(``derive_max_model_len_and_key``), unchanged in 0.33.0:

* the smallest of ``max_position_embeddings``, ``n_positions``, ``max_seq_len``, ``seq_length``,
  ``max_target_positions``, ``max_sequence_length``, ``max_seq_length``, ``seq_len``; a
  ``model_max_length`` key wins over all of them; none at all → 2048 (with a warning);
* RoPE scaling of every type but ``su``/``longrope``/``llama3`` multiplies it by ``factor``; for
  ``yarn`` the base is ``original_max_position_embeddings`` instead; gemma-3 is skipped (its
  ``max_position_embeddings`` is already scaled);
* without ``--max-model-len`` vLLM uses the derived value (``longrope``: the original length).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from llmdeck.errors import ConfigError
from llmdeck.plan.configread import MAX_CONTEXT_LEN

LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
NO_FACTOR_TYPES = ("su", "longrope", "llama3")
DEFAULT_MAX_LEN = 2048


class DerivedLength(BaseModel):
    max_len: int
    key: str
    base: int
    factor: float = 1.0
    rope_type: str | None = None
    default_len: int
    guessed: bool = False

    def describe(self) -> str:
        if self.factor != 1.0:
            key = "original_max_position_embeddings" if self.rope_type == "yarn" else self.key
            return f"{key}={self.base} × {self.rope_type} factor {self.factor:g} = {self.max_len}"
        return f"{self.key}={self.max_len}" + (" (no length key: vLLM assumes 2048)" if self.guessed else "")


def _rope_list(t: dict[str, Any]) -> list[dict[str, Any]]:
    """The RoPE scaling dicts (transformers 5 ``rope_parameters`` may be nested per layer type)."""
    raw = t.get("rope_scaling")
    if not isinstance(raw, dict) or not raw:
        raw = t.get("rope_parameters")
    if not isinstance(raw, dict) or not raw:
        return []
    if all(isinstance(v, dict) for v in raw.values()):
        return [v for v in raw.values() if isinstance(v, dict)]
    return [raw]


def derive_max_len(t: dict[str, Any]) -> DerivedLength:
    """vLLM's derived max_model_len for a text config (dict)."""
    best: float = float("inf")
    key = "max_position_embeddings"
    for k in LEN_KEYS:
        v = t.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v < best:
            best, key = v, k
    mml = t.get("model_max_length")
    if isinstance(mml, int | float) and not isinstance(mml, bool) and math.isfinite(mml) and mml:
        best, key = mml, "model_max_length"
    guessed = best == float("inf")
    base = DEFAULT_MAX_LEN if guessed else int(best)
    derived = float(min(base, MAX_CONTEXT_LEN + 1))  # a 400-digit JSON int is no float
    factor, rope_type = 1.0, None
    if "gemma3" not in str(t.get("model_type", "")):
        for rp in _rope_list(t):
            rtype = str(rp.get("rope_type") or rp.get("type") or "default")
            if rtype in NO_FACTOR_TYPES:
                rope_type = rope_type or rtype
                continue
            f = rp.get("factor")
            if isinstance(f, int | float) and not isinstance(f, bool) and rtype != "default":
                factor, rope_type = float(f), rtype
            if rtype == "yarn" and isinstance(rp.get("original_max_position_embeddings"), int):
                base = int(rp["original_max_position_embeddings"])
                derived = float(min(base, MAX_CONTEXT_LEN + 1))
        derived *= factor
    if not 1 <= derived <= MAX_CONTEXT_LEN:  # NaN fails too
        raise ConfigError(
            f"The config's context length is {derived:g} (base {base:g}, RoPE factor {factor:g}), outside "
            f"1..{MAX_CONTEXT_LEN:,}; no real model comes near.",
            hint=f"Fix {key} or the rope_scaling factor (compare with the model's page on Hugging Face).",
        )
    default_len = int(derived)
    if rope_type == "longrope":
        orig = t.get("original_max_position_embeddings")
        default_len = int(orig) if isinstance(orig, int) and 1 <= orig <= derived else int(derived)
    return DerivedLength(
        max_len=int(derived),
        key=key,
        base=base,
        factor=factor,
        rope_type=rope_type,
        default_len=default_len,
        guessed=guessed,
    )
