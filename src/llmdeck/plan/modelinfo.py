"""Model facts read from a Hugging Face ``config.json`` (never the weights).

Handles dense and MoE decoders (shared experts, ``first_k_dense_replace``), MLA attention
(DeepSeek-V2/V3, GLM-4.7-Flash: ``kv_lora_rank``), sliding-window layers (``layer_types``,
model-level ``sliding_window``; gpt-oss, gemma-3, Mistral), attention sinks, hybrid linear
attention (Qwen3-Next, Qwen3.5/3.6: ``layer_types``, ``full_attention_interval``, ``linear_*``,
``mamba_ssm_dtype``), the ``text_config`` nesting of multimodal checkpoints, ModelOpt's
``hf_quant_config.json``, RoPE scaling, and config values left to the library default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from llmdeck.errors import ConfigError, ModelPathError
from llmdeck.formats.model_folder import (
    broken_link_error,
    read_hf_quant_config,
    read_index_total_size,
    read_model_config,
    read_tokenizer_max_length,
)
from llmdeck.plan.configfields import (
    MLA_MODEL_TYPES,
    NO_KV_TYPES,
    apply_sliding_window,
    cfg_get,
    layer_kinds,
    linear_fields,
    mla_fields,
    moe_fields,
    prepare_config,
    vision_params_estimate,
)
from llmdeck.plan.configread import config_named
from llmdeck.plan.quant import QuantizationInfo, parse_quantization
from llmdeck.plan.rope import YARN_PRESCALED_SINCE, DerivedLength, derive_max_len
from llmdeck.plan.versions import at_least

__all__ = ["DTYPE_BYTES", "ModelFacts", "QuantizationInfo", "facts_from_config", "facts_from_dir"]
__all__ += ["MLA_MODEL_TYPES"]

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "float8_e4m3fn": 1,
}

# Architectures whose linear-attention layers keep a Gated-DeltaNet (mamba-style) state.
HYBRID_GDN_MODEL_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"}


class ModelFacts(BaseModel):
    """What the planner needs to know about one model, from its config.json."""

    source: str = Field(..., description="Where the config came from (path or catalog entry).")
    architecture: str
    model_type: str
    dtype: str = "bfloat16"
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int = 0
    vocab_size: int
    max_position_embeddings: int
    derived_max_len: int = Field(0, description="The longest context vLLM allows (RoPE scaling applied).")
    derived_max_len_how: str = ""
    default_max_len: int = Field(0, description="What vLLM uses without --max-model-len.")
    prescaled: tuple[int, str, int] | None = Field(
        None, description="(derived, how, default) under vLLM >= 0.30's YaRN rule, where it differs"
    )
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    attn_output_gate: bool = False
    qk_norm: bool = False
    attention_sinks: bool = Field(False, description="learned per-head sinks (gpt-oss): no KV")
    num_kv_shared_layers: int = Field(0, description="last layers reusing an earlier layer's KV (gemma-3n/4)")
    # MLA
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # sliding window (per layer, from layer_types) and chunked local attention
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    # MoE
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    n_shared_experts: int = 0
    first_k_dense_replace: int = 0
    moe_layer_freq: int = 1
    decoder_sparse_step: int = 1
    mlp_only_layers: list[int] = Field(default_factory=list)
    expert_bias: bool = False
    # per layer: full_attention | sliding_attention | linear_attention | chunked_attention | mlp | moe
    layer_types: list[str] = Field(default_factory=list)
    linear_conv_kernel_dim: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    mamba_ssm_dtype: str | None = None
    # Mamba-2 mixers (Nemotron-H: layer_types "linear_attention" for M, "mlp" for -)
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    ssm_state_size: int = 0
    mamba_n_groups: int = 0
    mamba_conv_kernel: int = 4
    mamba_intermediate_size: int = Field(0, description="the Mamba-2 mixer's inner width (heads x head dim)")
    mamba_chunk_size: int = Field(2048, description="vLLM's get_mamba_chunk_size (Mamba-1: 2048)")
    mtp_num_hidden_layers: int = 0
    partial_rotary_factor: float = 1.0
    # multimodal / quantization
    has_vision: bool = False
    vision_params: int = 0
    quantization: QuantizationInfo | None = None
    checkpoint_bytes: int | None = Field(None, description="safetensors index total_size, when present.")
    defaults_used: list[str] = Field(default_factory=list, description="keys filled from library defaults")
    defaults_source: str = "config.json"

    # ---- derived ------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def use_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def types(self) -> list[str]:
        return self.layer_types or ["full_attention"] * self.num_hidden_layers

    @property
    def is_hybrid(self) -> bool:
        """Mamba-style hybrid (linear-attention layers with a constant state): vLLM's ``is_hybrid``."""
        return any(t == "linear_attention" for t in self.layer_types)

    @property
    def has_sliding_window(self) -> bool:
        return any(t == "sliding_attention" for t in self.types)

    @property
    def full_attention_layers(self) -> int:
        return sum(1 for t in self.types if t == "full_attention")

    @property
    def sliding_attention_layers(self) -> int:
        return sum(1 for t in self.types if t == "sliding_attention")

    @property
    def attention_layers(self) -> int:
        return sum(1 for t in self.types if t != "linear_attention" and t not in NO_KV_TYPES)

    @property
    def linear_attention_layers(self) -> int:
        return sum(1 for t in self.types if t == "linear_attention")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 2)

    @property
    def ssm_dtype_bytes(self) -> int:
        if self.mamba_ssm_dtype:
            return DTYPE_BYTES.get(self.mamba_ssm_dtype, self.dtype_bytes)
        return self.dtype_bytes

    @property
    def kv_head_size(self) -> int:
        """vLLM's ``get_head_size``: MLA keeps one latent of kv_lora_rank + qk_rope_head_dim."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.use_mla else self.head_dim

    @property
    def kind(self) -> str:
        parts = []
        if self.is_hybrid:
            parts.append("hybrid")
        if self.use_mla:
            parts.append("MLA")
        if self.has_sliding_window:
            parts.append("sliding-window")
        parts.append("MoE" if self.is_moe else "dense")
        return " ".join(parts)

    def moe_layer(self, i: int) -> bool:
        if not self.is_moe or i in self.mlp_only_layers or i < self.first_k_dense_replace:
            return False
        if self.first_k_dense_replace or self.n_shared_experts:
            return i % max(1, self.moe_layer_freq) == 0
        step = max(1, self.decoder_sparse_step)
        return (i + 1) % step == 0

    @property
    def rotary_dim(self) -> int:
        head = self.qk_rope_head_dim if self.use_mla else self.head_dim
        return int(head * (1.0 if self.use_mla else self.partial_rotary_factor))

    def for_vllm(self, version: str | None) -> ModelFacts:
        """These facts as ``version`` reads the config: from 0.30 a YaRN factor is not applied."""
        if self.prescaled is None or not at_least(version, YARN_PRESCALED_SINCE):
            return self
        derived, how, default = self.prescaled
        update = {"derived_max_len": derived, "derived_max_len_how": how, "default_max_len": default}
        return self.model_copy(update=update | {"prescaled": None})

    def rotary_cache_bytes(self) -> int:
        """vLLM's cos/sin cache: max_position × rotary_dim in the model dtype (counted in weights)."""
        positions = max(self.max_position_embeddings, self.derived_max_len)
        return positions * self.rotary_dim * self.dtype_bytes

    def language_model_params(self) -> int:
        from llmdeck.plan.params import language_model_params

        return language_model_params(self)

    def weight_bytes(self, *, language_model_only: bool = True) -> int:
        """Bytes of weights vLLM loads (safetensors index when known, else params × bytes per scheme).

        Both include vLLM's rotary cos/sin cache, which "Model loading took X GiB" counts.
        """
        from llmdeck.plan.params import weight_bytes

        return weight_bytes(self, language_model_only=language_model_only) + self.rotary_cache_bytes()


def _vllm_dtype(config_dtype: str) -> str:
    """``--dtype auto``: float32 checkpoints run in bfloat16 on CUDA (vllm 0.22.0
    config/model.py:2003-2025, _resolve_auto_dtype: supported_dtypes[0] is bfloat16)."""
    if config_dtype in {"float32", "float", "fp32"}:
        return "bfloat16"
    return {"half": "float16", "bf16": "bfloat16", "fp16": "float16"}.get(config_dtype, config_dtype)


def _quantization(qc: Any, quant_file: dict[str, Any] | None, source: str) -> QuantizationInfo | None:
    """The parsed quantization; a broken ``quantization_config`` is a ConfigError naming the field."""
    where = "quantization_config" if qc else "hf_quant_config.json"
    try:
        return parse_quantization(qc or quant_file)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err.get("loc", ()))
        given = json.dumps(err.get("input"), default=str)[:60]
        problem = f"field {where}.{field}: {err.get('msg')} (it is {given})"
    except (TypeError, ValueError, AttributeError) as exc:
        problem = f"its {where} has a field of the wrong shape ({exc})"
    raise ConfigError(
        f"{config_named(source)} is not a usable model config: {problem}.",
        hint="Re-download the model's config files; compare them with the model's page on Hugging Face.",
    )


def _length_fields(t: dict[str, Any], source: str, tokenizer_max: int | None) -> dict[str, Any]:
    """The context vLLM derives, and (``prescaled``) what vLLM >= 0.30's YaRN rule derives instead."""
    length: DerivedLength = derive_max_len(t, source, tokenizer_max=tokenizer_max)
    newer = derive_max_len(t, source, yarn_prescaled=True, tokenizer_max=tokenizer_max)
    return {
        "derived_max_len": length.max_len,
        "derived_max_len_how": length.describe(),
        "default_max_len": length.default_len,
        "prescaled": None if newer == length else (newer.max_len, newer.describe(), newer.default_len),
    }


def facts_from_config(
    cfg: dict[str, Any],
    *,
    source: str,
    checkpoint_bytes: int | None = None,
    quant_file: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    tokenizer_max: int | None = None,
) -> ModelFacts:
    """Build :class:`ModelFacts` from a parsed config.json; raise ConfigError when it is not a decoder.
    ``tokenizer_max``: the folder's tokenizer_config ``model_max_length`` (vLLM caps the context by it)."""
    cfg, t = prepare_config(cfg, source, overrides)
    h, n_heads, n_layers = int(t["hidden_size"]), int(t["num_attention_heads"]), int(t["num_hidden_layers"])
    model_type = str(cfg_get(t, "model_type", cfg_get(cfg, "model_type", "unknown")))
    types, window = apply_sliding_window(t, layer_kinds(t, n_layers, source), n_layers)
    quant = _quantization(t.get("quantization_config"), quant_file, source)
    lengths = _length_fields(t, source, tokenizer_max)
    archs = cfg.get("architectures") or []
    vc = cfg.get("vision_config")
    try:
        return ModelFacts(
            source=source,
            architecture=str(archs[0]) if archs else str(cfg_get(cfg, "model_type", "unknown")),
            model_type=str(cfg_get(cfg, "model_type", model_type)),
            dtype=_vllm_dtype(str(cfg_get(t, "dtype", cfg_get(t, "torch_dtype", "bfloat16")))),
            hidden_size=h,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            num_key_value_heads=int(cfg_get(t, "num_key_value_heads", n_heads)),
            head_dim=int(cfg_get(t, "head_dim", h // n_heads)),
            intermediate_size=int(cfg_get(t, "intermediate_size", 0)),
            vocab_size=int(t["vocab_size"]),
            max_position_embeddings=int(cfg_get(t, "max_position_embeddings", lengths["derived_max_len"])),
            **lengths,
            tie_word_embeddings=bool(cfg_get(t, "tie_word_embeddings", False)),
            attention_bias=bool(cfg_get(t, "attention_bias", False)),
            attn_output_gate=bool(cfg_get(t, "attn_output_gate", False)),
            qk_norm=model_type.startswith(("qwen3", "gemma3")),
            attention_sinks=model_type == "gpt_oss",
            num_kv_shared_layers=int(cfg_get(t, "num_kv_shared_layers", 0)),
            expert_bias=model_type == "gpt_oss",
            sliding_window=window,
            attention_chunk_size=t.get("attention_chunk_size") if "chunked_attention" in types else None,
            layer_types=types if len(set(types)) > 1 or (types and types[0] != "full_attention") else [],
            **moe_fields(t),
            **mla_fields(t, model_type),
            **linear_fields(t),
            has_vision=isinstance(vc, dict),
            vision_params=vision_params_estimate(vc) if isinstance(vc, dict) else 0,
            quantization=quant,
            checkpoint_bytes=checkpoint_bytes,
            defaults_used=t["_defaults_used"],
            defaults_source=t["_defaults_source"],
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"{config_named(source)} has a field of the wrong type ({exc}).",
            hint="Re-download config.json; llmdeck reads numbers where the model card promises numbers.",
        ) from exc


def facts_from_dir(model_dir: Path, *, overrides: dict[str, Any] | None = None) -> ModelFacts:
    """Facts of a local model folder (config.json, hf_quant_config.json, safetensors index)."""
    model_dir = Path(model_dir)
    if (broken := broken_link_error(model_dir)) is not None:
        raise broken
    if model_dir.is_file() and model_dir.name.endswith(".json"):
        model_dir = model_dir.parent  # `plan PATH/config.json` reads like its folder
    config = model_dir / "config.json"
    if (broken := broken_link_error(config)) is not None:
        raise broken
    if not model_dir.is_dir():
        what = "does not exist, so it is not a folder" if not model_dir.exists() else "is not a folder"
        raise ModelPathError(f"{model_dir} {what}.", hint="Pass a model folder, a catalog name or a repo id.")
    if config.exists() and not config.is_file():
        from llmdeck.util.localfile import not_regular

        raise ModelPathError(
            f"{config} cannot be read: {not_regular(config, config.stat().st_mode).strerror}.",
            hint="Replace it with the model's config.json file.",
        )
    if not config.is_file():
        raise ModelPathError(
            f"{model_dir} has no config.json, so it is not a Hugging Face model folder.",
            hint="Download the model (or just its config.json) into that folder first.",
        )
    return facts_from_config(
        read_model_config(config),
        source=str(config),
        checkpoint_bytes=read_index_total_size(model_dir),
        quant_file=read_hf_quant_config(model_dir),
        overrides=overrides,
        tokenizer_max=read_tokenizer_max_length(model_dir),
    )
