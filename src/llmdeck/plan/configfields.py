"""Reading the fields of a config.json's text section into the planner's terms (pure dict work).

Layer kinds from ``layer_types`` / ``full_attention_interval``; vLLM's sliding-window rule; MoE,
MLA and Gated-DeltaNet fields under their several names; the config preparation (overrides,
``text_config``, library defaults, size validation).
"""

from __future__ import annotations

from typing import Any

from llmdeck.errors import ConfigError
from llmdeck.plan.configread import (
    config_named,
    fill_library_defaults,
    text_section,
    validate_fields,
    validate_sizes,
)

# vllm 0.22.0 transformers_utils/model_arch_config_convertor.py:220-244 (is_deepseek_mla).
MLA_MODEL_TYPES = {
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_mtp",
    "glm_moe_dsa",
    "glm4_moe_lite",
    "glm4_moe_lite_mtp",
    "kimi_k2",
    "kimi_linear",
    "longcat_flash",
    "pangu_ultra_moe",
    "AXK1",
}
LINEAR_TYPES = {"linear_attention", "mamba", "gated_deltanet"}
# Nemotron-H's hybrid_override_pattern, one block a layer (vllm 0.22.0 models/nemotron_h.py): M a Mamba-2
# mixer (a constant state), * attention (KV), - an MLP and E a MoE (neither). Another letter leaves the
# pattern unread, and the lint says so.
NEMOTRON_H_BLOCKS = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "moe"}
NO_KV_TYPES = ("mlp", "moe")  # layers that hold neither KV nor a state
SLIDING_TYPES = {"sliding_attention", "sliding_window", "local_attention"}
# the shared expert's width under its names (Granite 4's shared_mlp: shared_intermediate_size)
SHARED_EXPERT_KEYS = (
    "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "shared_intermediate_size",
)


def vision_params_estimate(vc: dict[str, Any]) -> int:
    """Rough parameter count of a ViT tower (only used without --language-model-only)."""
    h = int(vc.get("hidden_size", 0) or 0)
    depth = int(vc.get("depth", vc.get("num_hidden_layers", 0)) or 0)
    inter = int(vc.get("intermediate_size", 4 * h) or 0)
    out = int(vc.get("out_hidden_size", h) or h)
    return depth * (4 * h * h + 2 * h * inter) + 4 * h * out


def cfg_get(cfg: dict[str, Any], key: str, default: Any = None) -> Any:
    value = cfg.get(key, default)
    return default if value is None else value


def cfg_first(cfg: dict[str, Any], keys: tuple[str, ...], default: Any = 0) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def layer_kinds(t: dict[str, Any], n_layers: int, source: str) -> list[str]:
    """Per-layer attention kind, normalized; [] for a plain decoder (all full attention)."""
    raw = [str(x) for x in cfg_get(t, "layer_types", [])]
    pattern = t.get("hybrid_override_pattern")
    if not raw and isinstance(pattern, str) and pattern and set(pattern) <= set(NEMOTRON_H_BLOCKS):
        raw = [NEMOTRON_H_BLOCKS[c] for c in pattern]
    interval = t.get("full_attention_interval")
    if not raw and isinstance(interval, int) and interval > 0:
        raw = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)]
    if raw and len(raw) != n_layers:
        raise ConfigError(
            f"{config_named(source)} lists {len(raw)} layer_types for {n_layers} layers (field layer_types).",
            hint="The file looks truncated or edited; re-download config.json.",
        )
    out = []
    for x in raw:
        if x in LINEAR_TYPES:
            out.append("linear_attention")
        elif x in SLIDING_TYPES:
            out.append("sliding_attention")
        elif x in {"chunked_attention"}:
            out.append("chunked_attention")
        elif x in NO_KV_TYPES:
            out.append(x)
        else:
            out.append("full_attention")
    return out


def apply_sliding_window(t: dict[str, Any], types: list[str], n_layers: int) -> tuple[list[str], int | None]:
    """vLLM 0.22 engine/arg_utils.py:1738-1742 and transformers_utils/config.py:560-567: an
    interleaved model (several layer types) windows only its ``sliding_attention`` layers;
    otherwise a model-level ``sliding_window`` applies to every layer (0 means none:
    config/model.py:669-675; transformers drops it when ``use_sliding_window`` is false)."""
    window = t.get("sliding_window")
    if t.get("use_sliding_window") is False or not isinstance(window, int) or window <= 0:
        window = None
    if window is None:
        return [("full_attention" if x == "sliding_attention" else x) for x in types], None
    if len(set(types)) > 1:
        return types, window
    if any(x == "linear_attention" for x in types):
        return types, None
    return ["sliding_attention"] * n_layers, window


def moe_fields(t: dict[str, Any]) -> dict[str, Any]:
    experts = int(
        cfg_first(t, ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"), 0) or 0
    )
    return {
        "num_experts": experts,
        "num_experts_per_tok": int(
            cfg_first(t, ("num_experts_per_tok", "experts_per_token", "moe_topk"), 0) or 0
        ),
        "moe_intermediate_size": int(
            cfg_get(t, "moe_intermediate_size", cfg_get(t, "intermediate_size", 0) if experts else 0)
        ),
        "shared_expert_intermediate_size": int(cfg_first(t, SHARED_EXPERT_KEYS, 0) or 0),
        "n_shared_experts": int(cfg_get(t, "n_shared_experts", 0)),
        "first_k_dense_replace": int(cfg_get(t, "first_k_dense_replace", 0)),
        "moe_layer_freq": int(cfg_get(t, "moe_layer_freq", 1)),
        "decoder_sparse_step": int(cfg_get(t, "decoder_sparse_step", 1)),
        "mlp_only_layers": [int(x) for x in cfg_get(t, "mlp_only_layers", [])],
    }


def mla_fields(t: dict[str, Any], model_type: str) -> dict[str, Any]:
    rank = t.get("kv_lora_rank")
    if model_type not in MLA_MODEL_TYPES or not isinstance(rank, int):
        return {}
    return {
        "kv_lora_rank": rank,
        "q_lora_rank": int(cfg_get(t, "q_lora_rank", 0)),
        "qk_rope_head_dim": int(cfg_get(t, "qk_rope_head_dim", 0)),
        "qk_nope_head_dim": int(cfg_get(t, "qk_nope_head_dim", 0)),
        "v_head_dim": int(cfg_get(t, "v_head_dim", 0)),
    }


def linear_fields(t: dict[str, Any]) -> dict[str, Any]:
    keys: tuple[str, ...] = ("linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim")
    keys += ("linear_num_key_heads", "linear_num_value_heads", "mtp_num_hidden_layers")
    out: dict[str, Any] = {k: int(cfg_get(t, k, 0)) for k in keys}
    out["mamba_ssm_dtype"] = t.get("mamba_ssm_dtype")
    out |= mamba2_fields(t)
    raw = t.get("rope_parameters")
    rope: dict[str, Any] = raw if isinstance(raw, dict) else {}
    out["partial_rotary_factor"] = float(
        cfg_get(t, "partial_rotary_factor", cfg_get(rope, "partial_rotary_factor", 1.0))
    )
    return out


def mamba2_fields(t: dict[str, Any]) -> dict[str, Any]:
    """Mamba-2 mixer sizes under Nemotron-H's names and Granite 4's (``mamba_n_heads``, ``mamba_d_head``,
    ``mamba_d_state``; the inner width ``mamba_expand x hidden``: vllm 0.22.0 granitemoehybrid.py:
    618-644). vLLM keeps Nemotron-H's SSM state in float32 unless the config names
    ``mamba_ssm_cache_dtype`` (0.22.0 models/config.py NemotronHForCausalLMConfig)."""
    out: dict[str, Any] = {
        "mamba_num_heads": int(cfg_first(t, ("mamba_num_heads", "mamba_n_heads"), 0) or 0),
        "mamba_head_dim": int(cfg_first(t, ("mamba_head_dim", "mamba_d_head"), 0) or 0),
        "ssm_state_size": int(cfg_first(t, ("ssm_state_size", "mamba_d_state"), 0) or 0),
        "mamba_n_groups": int(cfg_first(t, ("n_groups", "mamba_n_groups"), 0) or 0),
        "mamba_conv_kernel": int(cfg_first(t, ("conv_kernel", "mamba_d_conv"), 4) or 4),
        # vllm 0.22.0 config/model.py:1403-1418: mamba_chunk_size, then chunk_size, else 2048
        "mamba_chunk_size": int(cfg_first(t, ("mamba_chunk_size", "chunk_size"), 2048) or 2048),
    }
    expand = t.get("mamba_expand")
    if isinstance(expand, (int, float)) and not isinstance(expand, bool) and expand > 0:
        out["mamba_intermediate_size"] = int(expand * int(cfg_get(t, "hidden_size", 0)))
    else:
        out["mamba_intermediate_size"] = out["mamba_num_heads"] * out["mamba_head_dim"]
    if t.get("model_type") == "nemotron_h" and out["mamba_num_heads"]:
        out["mamba_ssm_dtype"] = str(t.get("mamba_ssm_cache_dtype") or "float32")
    return out


def prepare_config(
    cfg: Any, source: str, overrides: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(cfg, dict):
        raise ConfigError(f"{config_named(source)} is not a JSON object.", hint="Re-download it.")
    validate_fields(cfg, source)
    if overrides:
        cfg = {**cfg, **overrides}
        if isinstance(cfg.get("text_config"), dict):
            cfg["text_config"] = {**cfg["text_config"], **overrides}
    t = text_section(cfg)
    nested = isinstance(cfg.get("text_config"), dict)
    if "model_type" not in t and isinstance(cfg.get("model_type"), str):
        t["model_type"] = cfg["model_type"]
    filled, keys, where = fill_library_defaults(cfg, t)
    validate_sizes(filled, source + ("#text_config" if nested else ""))
    filled["_defaults_used"], filled["_defaults_source"] = keys, where
    return cfg, filled


def check_served_config(cfg: dict[str, Any], source: str) -> None:
    """The checks ``plan`` makes of a config.json's values, for a model that ``up`` serves: a field of
    the wrong shape, a size out of range, a RoPE scaling that breaks the context length is one
    ConfigError naming the file and the field (exit 2) before any engine starts. A size that is absent
    is the engine's business here (a model plan cannot size, e.g. an encoder-decoder, may still serve)."""
    from llmdeck.plan.rope import derive_max_len

    validate_fields(cfg, source)
    t = text_section(cfg)
    nested = isinstance(cfg.get("text_config"), dict)
    if "model_type" not in t and isinstance(cfg.get("model_type"), str):
        t["model_type"] = cfg["model_type"]
    validate_sizes(t, source + ("#text_config" if nested else ""), require=False)
    derive_max_len(t, source)
