"""Checking the fields of a parsed ``config.json`` (read by :mod:`llmdeck.formats.model_folder`).

Every way a config's sizes can be wrong — missing, zero, negative, not a whole number, past any real
model — becomes one :class:`ConfigError` naming the file and the field (exit 2), never a ``KeyError``
or ``ZeroDivisionError`` later.

Values a checkpoint leaves to the library default (gemma-3's nested ``text_config`` omits
``vocab_size``, ``layer_types``, ...) are filled the way vLLM sees them: from transformers'
config class for the ``model_type`` (vLLM builds its ``hf_config`` with the same class), and,
when transformers is not installed, from a short table of documented defaults — each such
value is recorded as a guess.
"""

from __future__ import annotations

import json
from typing import Any

from llmdeck.errors import ConfigError


def config_named(source: str) -> str:
    """How an error names the config it read, to start its sentence: the file's path when ``source`` is
    one (``/m/config.json``), else "The config.json of SOURCE" (a bundled catalog config). "The
    config.json of /m/config.json" had named the file twice."""
    return source if source.endswith(".json") else f"The config.json of {source}"


# Sizes that must be positive whole numbers when present (the first four are required).
REQUIRED_SIZES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
OPTIONAL_SIZES = (
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "max_position_embeddings",
    "moe_intermediate_size",
    "num_experts_per_tok",
    "sliding_window",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "q_lora_rank",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
)
# Upper bounds on the sizes plan reads: generous (far above any real model: 10M-token contexts,
# 262k vocabularies, a few hundred layers), low enough that the arithmetic stays in floats and
# a per-layer list fits in memory. Keys not named here use MAX_SIZE.
MAX_CONTEXT_LEN = 1 << 32
MAX_SIZE = 1 << 24
SIZE_LIMITS: dict[str, int] = {
    "num_hidden_layers": 100_000,
    "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16,
    "linear_num_key_heads": 1 << 16,
    "linear_num_value_heads": 1 << 16,
    "num_experts_per_tok": 1 << 16,
    "hidden_size": 1 << 20,
    "head_dim": 1 << 20,
    "vocab_size": 1 << 26,
    "max_position_embeddings": MAX_CONTEXT_LEN,
    "sliding_window": MAX_CONTEXT_LEN,
}
# Counts that may be 0 but must be whole numbers within MAX_SIZE when present.
BOUNDED_COUNTS = (
    "num_experts",
    "n_routed_experts",
    "num_local_experts",
    "moe_num_experts",
    "n_shared_experts",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "shared_expert_intermediate_size",
    "num_kv_shared_layers",
    "mtp_num_hidden_layers",
    "attention_chunk_size",
    "shared_intermediate_size",
    # Mamba-2 mixers under Nemotron-H's and Granite 4's names
    "mamba_num_heads",
    "mamba_n_heads",
    "mamba_head_dim",
    "mamba_d_head",
    "ssm_state_size",
    "mamba_d_state",
    "n_groups",
    "mamba_n_groups",
    "conv_kernel",
    "mamba_d_conv",
    "chunk_size",
    "mamba_chunk_size",
)
# Keys whose absence means the library default applies (so transformers is asked).
DEFAULTED_KEYS = (*REQUIRED_SIZES, "max_position_embeddings", "num_key_value_heads", "tie_word_embeddings")
# transformers' defaults for the model types whose public configs are known to lean on them
# (used only without transformers; each use is reported as a guess). Source: transformers 5.x
# configuration_gemma3.py (Gemma3TextConfig) and configuration_utils.py.
DOCUMENTED_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
    },
    "": {"tie_word_embeddings": False},
}


def text_section(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's part: ``text_config`` of multimodal checkpoints, else the whole config."""
    text = cfg.get("text_config")
    t: dict[str, Any] = dict(text) if isinstance(text, dict) else dict(cfg)
    for key in ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config"):
        if key not in t and key in cfg:
            t[key] = cfg[key]
    return t


def _bad_size(value: Any, limit: int = MAX_SIZE, *, positive: bool = True) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is {json.dumps(value)[:60]}, not a whole number"
    if isinstance(value, float) and not value.is_integer():
        return f"is {json.dumps(value)}, not a whole number"
    if value <= 0 if positive else value < 0:
        return f"is {json.dumps(value)}; it must be {'positive' if positive else 'zero or more'}"
    if value > limit:
        return f"is {json.dumps(value)[:60]}, more than {limit:,} (no real model comes near)"
    return None


def _size_problems(t: dict[str, Any]) -> tuple[str, str] | None:
    """(key, why) of the first size that is not a positive whole number within its limit."""
    for key in (*REQUIRED_SIZES, *OPTIONAL_SIZES):
        if t.get(key) is not None and (why := _bad_size(t[key], SIZE_LIMITS.get(key, MAX_SIZE))):
            return key, why
    for key in BOUNDED_COUNTS:  # only numbers: other shapes fail the model's type check later
        value = t.get(key)
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (why := _bad_size(value, positive=False))
        ):
            return key, why
    return None


def _head_dim_problem(t: dict[str, Any]) -> tuple[str, str] | None:
    """vLLM takes head_dim = hidden_size // num_attention_heads when head_dim is absent, and splits
    the query heads evenly over the KV heads: refuse a split that leaves a remainder."""
    heads, kv = int(t["num_attention_heads"]), t.get("num_key_value_heads")
    if t.get("head_dim") is None and t.get("kv_lora_rank") is None and int(t["hidden_size"]) % heads:
        return "num_attention_heads", (
            f"is {heads}, which does not divide hidden_size {int(t['hidden_size'])} and no head_dim is given "
            "(the head size would be fractional)"
        )
    if kv is not None and heads % int(kv):
        return "num_key_value_heads", f"is {int(kv)}, which does not divide num_attention_heads {heads}"
    return _experts_problem(t)


def _experts_problem(t: dict[str, Any]) -> tuple[str, str] | None:
    """A token routed to more experts than the model has (planned as a MoE, exit 0, before)."""
    experts = next((t[k] for k in ("num_experts", "n_routed_experts", "num_local_experts") if t.get(k)), None)
    per_token = next(
        (t[k] for k in ("num_experts_per_tok", "experts_per_token", "moe_topk") if t.get(k)), None
    )
    if isinstance(experts, int) and isinstance(per_token, int) and per_token > experts:
        return "num_experts_per_tok", f"is {per_token}, more than the {experts} experts the model has"
    return None


def validate_sizes(t: dict[str, Any], source: str, *, require: bool = True) -> None:
    """Raise one ConfigError naming the file and the first bad or missing size (``require=False``:
    a missing size is no error, the sizes given are checked)."""
    where = "text_config." if source.endswith("#text_config") else ""
    src = source.removesuffix("#text_config")
    missing = [k for k in REQUIRED_SIZES if t.get(k) is None]
    if missing and require:
        raise ConfigError(
            f"{config_named(src)} lacks {', '.join(where + k for k in missing)}, so llmdeck cannot "
            "size the model (is it a decoder-only language model, and is the file complete?).",
            hint="Check the file against the model's page on Hugging Face, or re-download config.json.",
        )
    problem = _size_problems(t) or (None if missing else _head_dim_problem(t))
    if problem:
        key, why = problem
        raise ConfigError(
            f"{config_named(src)} is not a usable model config: field {where}{key} {why}.",
            hint=f"Fix {key} (compare with the model's page on Hugging Face) or re-download config.json.",
        )
    for key in ("layer_types", "mlp_only_layers"):
        if key in t and t[key] is not None and not isinstance(t[key], list):
            raise ConfigError(
                f"{config_named(src)}: field {where}{key} is {json.dumps(t[key])[:60]}, not a list.",
                hint="Re-download config.json.",
            )


# The dtypes a config.json names (torch's float types, which transformers looks up by name, and the
# short spellings llmdeck reads as the same): any other is a typo that transformers refuses.
CONFIG_DTYPES = (
    "bfloat16", "float16", "float32", "float64", "half", "float", "double", "bf16", "fp16", "fp32",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8",
)  # fmt: skip


# Fields that hold a JSON object when present; transformers and vLLM index into them.
_OBJECT_FIELDS = {
    "quantization_config": 'the quantization\'s settings, e.g. {"quant_method": "fp8", ...}',
    "rope_scaling": 'the RoPE scaling\'s settings, e.g. {"rope_type": "yarn", "factor": 4.0}',
    "text_config": "the language model's settings",
    "vision_config": "the vision encoder's settings",
}
_TOP_ONLY = {"text_config", "vision_config"}


def _field_problems(section: dict[str, Any], top: bool) -> tuple[str, str] | None:
    """(key, why) of the first of dtype, quantization_config, architectures, model_type of the wrong shape."""
    for key in ("torch_dtype", "dtype"):
        value = section.get(key)
        if value is not None and value not in CONFIG_DTYPES:
            return (
                key,
                f"is {json.dumps(value)[:60]}, not a dtype (one of {', '.join(CONFIG_DTYPES[:3])}, ...)",
            )
    for key, holds in _OBJECT_FIELDS.items():
        value = section.get(key)
        if value is not None and not isinstance(value, dict) and (top or key not in _TOP_ONLY):
            return key, f"is {json.dumps(value)[:60]}, not an object (it holds {holds})"
    method = (section.get("quantization_config") or {}).get("quant_method")
    if method is not None and (not isinstance(method, str) or not method):
        return "quantization_config", (
            f'has quant_method {json.dumps(method)[:60]}, not a method name (a string, e.g. "fp8")'
        )
    archs = section.get("architectures")
    if (
        top
        and archs is not None
        and (not isinstance(archs, list) or not archs or not all(isinstance(a, str) and a for a in archs))
    ):
        return (
            "architectures",
            f'is {json.dumps(archs)[:60]}, not a list of model class names (e.g. ["LlamaForCausalLM"])',
        )
    model_type = section.get("model_type")
    if model_type is not None and (not isinstance(model_type, str) or not model_type):
        return (
            "model_type",
            f'is {json.dumps(model_type)[:60]}, not a model type name (a string, e.g. "llama")',
        )
    return None


def validate_fields(cfg: dict[str, Any], source: str) -> None:
    """Raise one ConfigError naming the file and the first of the dtype, ``quantization_config``,
    ``architectures`` or ``model_type`` fields (at the top or in ``text_config``) of the wrong shape."""
    text = cfg.get("text_config")
    for where, section in (("", cfg), ("text_config.", text if isinstance(text, dict) else {})):
        problem = _field_problems(section, top=not where)
        if problem:
            key, why = problem
            raise ConfigError(
                f"{config_named(source)} is not a usable model config: field {where}{key} {why}.",
                hint=f"Fix {key} (compare with the model's page on Hugging Face) or re-download config.json.",
            )


def _transformers_defaults(cfg: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The text config as transformers builds it (all defaults filled), or None without it."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        return None
    try:
        import transformers
        from transformers import CONFIG_MAPPING
    except ImportError:
        return None
    if model_type not in CONFIG_MAPPING:
        return None
    try:
        obj = CONFIG_MAPPING[model_type].from_dict(dict(cfg))
        text = obj.get_text_config()
        return text.to_dict(), f"transformers {transformers.__version__} ({type(text).__name__})"
    except Exception:  # a config transformers itself rejects: fall back to the table
        return None


def _table_defaults(cfg: dict[str, Any], t: dict[str, Any]) -> dict[str, Any]:
    model_type = str(t.get("model_type") or cfg.get("model_type") or "")
    table = DOCUMENTED_DEFAULTS.get(model_type) or DOCUMENTED_DEFAULTS.get(model_type + "_text") or {}
    return {**DOCUMENTED_DEFAULTS[""], **table}


def fill_library_defaults(cfg: dict[str, Any], t: dict[str, Any]) -> tuple[dict[str, Any], list[str], str]:
    """(text section with defaults filled, keys filled, where they came from).

    Only asks transformers (a slow import) when a key the planner needs is absent, or a sliding
    window comes without its per-layer ``layer_types``.
    """
    needs = [k for k in DEFAULTED_KEYS if t.get(k) is None]
    if t.get("sliding_window") is not None and not t.get("layer_types"):
        needs.append("layer_types")
    if not needs:
        return t, [], "config.json"
    filled = dict(t)
    got = _transformers_defaults(cfg)
    if got is not None:
        lib, where = got
        keys = [k for k, v in lib.items() if filled.get(k) is None and v is not None]
        for k in keys:
            filled[k] = lib[k]
        return filled, sorted(k for k in keys if k in (*needs, "sliding_window", "head_dim")), where
    table = _table_defaults(cfg, t)
    keys = [k for k, v in table.items() if filled.get(k) is None]
    for k in keys:
        filled[k] = table[k]
    pattern = filled.get("sliding_window_pattern")
    if (
        filled.get("sliding_window")
        and not filled.get("layer_types")
        and isinstance(pattern, int)
        and pattern > 0
    ):
        n = int(filled.get("num_hidden_layers") or 0)
        filled["layer_types"] = [
            "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)
        ]
        keys.append("layer_types")
    return filled, sorted(keys), "guess (transformers not installed: llmdeck's table of documented defaults)"
