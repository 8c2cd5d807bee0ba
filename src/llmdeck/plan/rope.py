"""The longest context vLLM allows a model: ``max_position_embeddings`` and RoPE scaling.

Follows vllm 0.22.0 ``vllm/config/model.py:2119-2253`` (``_get_and_verify_max_len``) and
``vllm/transformers_utils/model_arch_config_convertor.py:278-311``
(``derive_max_model_len_and_key``), the same through 0.29.0 but for YaRN (below):

* the smallest of ``max_position_embeddings``, ``n_positions``, ``max_seq_len``, ``seq_length``,
  ``max_target_positions``, ``max_sequence_length``, ``max_seq_length``, ``seq_len``; a
  ``model_max_length`` key wins over all of them; none at all → 2048 (with a warning);
* RoPE scaling of every type but ``su``/``longrope``/``llama3`` multiplies it by ``factor``; for
  ``yarn`` the base is ``original_max_position_embeddings`` instead; gemma-3 is skipped (its
  ``max_position_embeddings`` is already scaled);
* without ``--max-model-len`` vLLM uses the derived value (``longrope``: the original length).

From 0.30.0 (vLLM PR #56446; the 0.30.0-0.34.0 wheels' config/model.py, 0.34.0 :2653-2665) the YaRN
types (``yarn``, ``deepseek_yarn``, ``deepseek_llama_scaling``) apply no factor and keep no base of their
own: ``max_position_embeddings`` is taken as already scaled ("YaRN variants leave
max_position_embeddings already scaled"). A public YaRN config states both consistently (gpt-oss: 4096
× 32 = 131072 = max_position_embeddings), so the two rules agree; they part for a config that adds
``rope_scaling`` without raising ``max_position_embeddings`` (Qwen3's own YaRN recipe).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from llmdeck.errors import ConfigError
from llmdeck.plan.configread import MAX_CONTEXT_LEN, config_named

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
YARN_TYPES = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")
YARN_PRESCALED_SINCE = "0.30.0"  # from then vLLM applies no YaRN factor (docstring)
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


def _rope_list(t: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(field, dict) of each RoPE scaling dict (transformers 5 ``rope_parameters`` may be nested per
    layer type: ``rope_parameters.full_attention``)."""
    key = "rope_scaling"
    raw = t.get(key)
    if not isinstance(raw, dict) or not raw:
        key, raw = "rope_parameters", t.get("rope_parameters")
    if not isinstance(raw, dict) or not raw:
        return []
    if all(isinstance(v, dict) for v in raw.values()):
        return [(f"{key}.{k}", v) for k, v in raw.items() if isinstance(v, dict)]
    return [(key, raw)]


def _bad_rope(field: str, name: str, value: Any, source: str, expected: str) -> ConfigError:
    where = config_named(source) if source else "The config"
    return ConfigError(
        f"{where} is not a usable model config: field {field}.{name} is {json.dumps(value)[:60]}, "
        f"{expected}.",
        hint=f"Fix {field} (compare with the model's page on Hugging Face) or re-download config.json.",
    )


def _rope_factor(field: str, rp: dict[str, Any], source: str) -> float | None:
    """The scaling factor of one RoPE dict (None: none given); a ConfigError naming the field when it
    is no positive number (vLLM multiplies the context length by it)."""
    f = rp.get("factor")
    if f is None:
        return None
    if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f) or f <= 0:
        raise _bad_rope(field, "factor", f, source, "not a positive number (it scales the context length)")
    orig = rp.get("original_max_position_embeddings")
    if orig is not None and (
        isinstance(orig, bool)
        or not isinstance(orig, int | float)
        or not (math.isfinite(orig) and orig == int(orig) and 1 <= orig <= MAX_CONTEXT_LEN)
    ):
        expected = "not a positive whole number (the context length the model was trained at)"
        raise _bad_rope(field, "original_max_position_embeddings", orig, source, expected)
    return float(f)


def derive_max_len(
    t: dict[str, Any], source: str = "", *, yarn_prescaled: bool = False, tokenizer_max: int | None = None
) -> DerivedLength:
    """vLLM's derived max_model_len for a text config (dict); ``source`` names the file in errors;
    ``yarn_prescaled``: vLLM >= 0.30's rule (no factor for the YaRN types); ``tokenizer_max``: the
    tokenizer_config's ``model_max_length``, which vLLM takes the smaller of before any RoPE factor."""
    no_factor = NO_FACTOR_TYPES + (YARN_TYPES if yarn_prescaled else ())
    best: float = float("inf")
    key = "max_position_embeddings"
    for k in LEN_KEYS:
        v = t.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v < best:
            best, key = v, k
    mml = t.get("model_max_length")
    if isinstance(mml, int | float) and not isinstance(mml, bool) and math.isfinite(mml) and mml:
        best, key = mml, "model_max_length"
    if tokenizer_max is not None and tokenizer_max < best:
        best, key = tokenizer_max, "tokenizer_config.model_max_length"
    guessed = best == float("inf")
    base = DEFAULT_MAX_LEN if guessed else int(best)
    derived = float(min(base, MAX_CONTEXT_LEN + 1))  # a 400-digit JSON int is no float
    factor, rope_type, rope_field = 1.0, None, "rope_scaling"
    if "gemma3" not in str(t.get("model_type", "")):
        for field, rp in _rope_list(t):
            rtype = str(rp.get("rope_type") or rp.get("type") or "default")
            f = _rope_factor(field, rp, source)
            if rtype in no_factor:
                rope_type = rope_type or rtype
                continue
            if f is not None and rtype != "default":
                factor, rope_type, rope_field = f, rtype, field
            if rtype == "yarn" and rp.get("original_max_position_embeddings") is not None:
                base = int(rp["original_max_position_embeddings"])
                derived = float(min(base, MAX_CONTEXT_LEN + 1))
        derived *= factor
    if not 1 <= derived <= MAX_CONTEXT_LEN:  # NaN fails too
        blame = f"{rope_field}.factor" if factor != 1.0 else key
        where = f"of {source} " if source else ""
        raise ConfigError(
            f"The config's context length {where}is {derived:g} (base {base:g}, {rope_field} factor "
            f"{factor:g}), outside 1..{MAX_CONTEXT_LEN:,}; no real model comes near.",
            hint=f"Fix {blame} (compare with the model's page on Hugging Face) or re-download config.json.",
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
