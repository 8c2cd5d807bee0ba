"""Model facts read from a Hugging Face ``config.json`` (never the weights).

Handles dense and MoE decoders, hybrid linear-attention models (Qwen3-Next, Qwen3.5/3.6:
``layer_types``, ``full_attention_interval``, ``linear_*`` dims, ``mamba_ssm_dtype``), the
``text_config`` nesting of multimodal checkpoints, and ``quantization_config``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.errors import ConfigError, ModelPathError

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


class QuantizationInfo(BaseModel):
    """``quantization_config`` in short."""

    method: str
    fmt: str | None = None
    weight_block_size: list[int] | None = None
    bits: int | None = None

    @property
    def weight_bytes_per_param(self) -> float:
        if self.method in {"fp8", "fbgemm_fp8", "compressed-tensors", "modelopt"}:
            return 1.0
        if self.bits:
            return self.bits / 8
        if self.method in {"awq", "gptq", "mxfp4", "nvfp4"}:
            return 0.5
        return 2.0


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
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    attn_output_gate: bool = False
    # MoE
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    decoder_sparse_step: int = 1
    mlp_only_layers: list[int] = Field(default_factory=list)
    # hybrid linear attention (Gated DeltaNet)
    layer_types: list[str] = Field(default_factory=list)
    linear_conv_kernel_dim: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    mamba_ssm_dtype: str | None = None
    mtp_num_hidden_layers: int = 0
    partial_rotary_factor: float = 1.0
    # multimodal / quantization
    has_vision: bool = False
    vision_params: int = 0
    quantization: QuantizationInfo | None = None
    checkpoint_bytes: int | None = Field(None, description="safetensors index total_size, when present.")

    # ---- derived ------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_hybrid(self) -> bool:
        return any(t != "full_attention" for t in self.layer_types)

    @property
    def full_attention_layers(self) -> int:
        if not self.layer_types:
            return self.num_hidden_layers
        return sum(1 for t in self.layer_types if t == "full_attention")

    @property
    def linear_attention_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == "linear_attention")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 2)

    @property
    def ssm_dtype_bytes(self) -> int:
        if self.mamba_ssm_dtype:
            return DTYPE_BYTES.get(self.mamba_ssm_dtype, self.dtype_bytes)
        return self.dtype_bytes

    @property
    def kind(self) -> str:
        base = "hybrid linear-attention" if self.is_hybrid else "dense"
        if self.is_moe:
            base = ("hybrid " if self.is_hybrid else "") + "MoE"
        return base

    def _moe_layer(self, i: int) -> bool:
        if not self.is_moe or i in self.mlp_only_layers:
            return False
        step = max(1, self.decoder_sparse_step)
        return (i + 1) % step == 0

    def language_model_params(self) -> int:
        """Parameters of the language model vLLM loads (no vision tower, no MTP head)."""
        h = self.hidden_size
        params = self.vocab_size * h * (1 if self.tie_word_embeddings else 2) + h
        q_dim = self.num_attention_heads * self.head_dim
        kv_dim = self.num_key_value_heads * self.head_dim
        full_attn = h * q_dim * (2 if self.attn_output_gate else 1) + 2 * h * kv_dim + q_dim * h
        full_attn += 2 * self.head_dim  # q_norm / k_norm
        if self.attention_bias:
            full_attn += q_dim + 2 * kv_dim
        nk, nv = self.linear_num_key_heads, self.linear_num_value_heads
        dk, dv = self.linear_key_head_dim, self.linear_value_head_dim
        conv_dim = 2 * nk * dk + nv * dv
        linear_attn = (
            h * (2 * nk * dk + 2 * nv * dv)  # in_proj_qkvz
            + h * 2 * nv  # in_proj_ba
            + conv_dim * self.linear_conv_kernel_dim
            + 2 * nv  # dt_bias, A_log
            + dv  # gated norm
            + nv * dv * h  # out_proj
        )
        types = self.layer_types or ["full_attention"] * self.num_hidden_layers
        for i, layer_type in enumerate(types):
            params += 2 * h
            params += linear_attn if layer_type == "linear_attention" else full_attn
            if self._moe_layer(i):
                params += h * self.num_experts + self.num_experts * 3 * h * self.moe_intermediate_size
                if self.shared_expert_intermediate_size:
                    params += 3 * h * self.shared_expert_intermediate_size + h
            else:
                params += 3 * h * self.intermediate_size
        return params

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    def rotary_cache_bytes(self) -> int:
        """vLLM's cos/sin cache: max_position × rotary_dim in the model dtype (counted in weights)."""
        return self.max_position_embeddings * self.rotary_dim * self.dtype_bytes

    def weight_bytes(self, *, language_model_only: bool = True) -> int:
        """Bytes of weights vLLM loads: the safetensors index when known, else params × dtype.

        Both include vLLM's rotary cos/sin cache, which "Model loading took X GiB" counts.
        """
        return self._weight_bytes(language_model_only) + self.rotary_cache_bytes()

    def _weight_bytes(self, language_model_only: bool) -> int:
        embed = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        params = self.language_model_params()
        if self.checkpoint_bytes:
            total = self.checkpoint_bytes
            if self.has_vision and language_model_only:
                total -= self.vision_params * self.dtype_bytes
            return max(total, 0)
        if self.quantization:
            per = self.quantization.weight_bytes_per_param
            # embeddings, lm_head and norms stay in the model dtype; linear layers are quantized
            total = int((params - embed) * per + embed * self.dtype_bytes)
            if self.quantization.weight_block_size:
                block = math.prod(self.quantization.weight_block_size)
                total += int((params - embed) / block * 4)  # fp32 block scales
        else:
            total = params * self.dtype_bytes
        if self.has_vision and not language_model_only:
            total += self.vision_params * self.dtype_bytes
        return total


def _vision_params(vc: dict[str, Any]) -> int:
    """Rough parameter count of a ViT tower (only used without --language-model-only)."""
    h = int(vc.get("hidden_size", 0) or 0)
    depth = int(vc.get("depth", vc.get("num_hidden_layers", 0)) or 0)
    inter = int(vc.get("intermediate_size", 4 * h) or 0)
    out = int(vc.get("out_hidden_size", h) or h)
    return depth * (4 * h * h + 2 * h * inter) + 4 * h * out


def _get(cfg: dict[str, Any], key: str, default: Any = None) -> Any:
    value = cfg.get(key, default)
    return default if value is None else value


def facts_from_config(cfg: dict[str, Any], *, source: str, checkpoint_bytes: int | None = None) -> ModelFacts:
    """Build :class:`ModelFacts` from a parsed config.json; raise ConfigError when it is not a decoder."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"The config.json of {source} is not a JSON object.", hint="Re-download it.")
    archs = cfg.get("architectures") or []
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else None
    t: dict[str, Any] = dict(text) if text else dict(cfg)
    for key in ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config"):
        if key not in t and key in cfg:
            t[key] = cfg[key]
    missing = [
        k
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        if not isinstance(t.get(k), int)
    ]
    if missing:
        raise ConfigError(
            f"The config.json of {source} lacks {', '.join(missing)}, so llmdeck cannot size the model "
            "(is it a decoder-only language model, and is the file complete?).",
            hint="Check the file against the model's page on Hugging Face, or re-download config.json.",
        )
    h = int(t["hidden_size"])
    n_heads = int(t["num_attention_heads"])
    n_layers = int(t["num_hidden_layers"])
    head_dim = int(_get(t, "head_dim", h // n_heads))
    layer_types = [str(x) for x in _get(t, "layer_types", [])]
    interval = t.get("full_attention_interval")
    if not layer_types and isinstance(interval, int) and interval > 0:
        layer_types = [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)
        ]
    if layer_types and len(layer_types) != n_layers:
        raise ConfigError(
            f"The config.json of {source} lists {len(layer_types)} layer_types for {n_layers} layers.",
            hint="The file looks truncated or edited; re-download config.json.",
        )
    quant = None
    qc = t.get("quantization_config")
    if isinstance(qc, dict) and qc.get("quant_method"):
        quant = QuantizationInfo(
            method=str(qc["quant_method"]),
            fmt=qc.get("fmt"),
            weight_block_size=qc.get("weight_block_size"),
            bits=qc.get("bits") if isinstance(qc.get("bits"), int) else None,
        )
    vc = cfg.get("vision_config")
    dtype = str(_get(t, "dtype", _get(t, "torch_dtype", "bfloat16")))
    try:
        return ModelFacts(
            source=source,
            architecture=str(archs[0]) if archs else str(_get(cfg, "model_type", "unknown")),
            model_type=str(_get(cfg, "model_type", _get(t, "model_type", "unknown"))),
            dtype=dtype,
            hidden_size=h,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            num_key_value_heads=int(_get(t, "num_key_value_heads", n_heads)),
            head_dim=head_dim,
            intermediate_size=int(_get(t, "intermediate_size", 0)),
            vocab_size=int(t["vocab_size"]),
            max_position_embeddings=int(_get(t, "max_position_embeddings", 2048)),
            tie_word_embeddings=bool(_get(t, "tie_word_embeddings", False)),
            attention_bias=bool(_get(t, "attention_bias", False)),
            attn_output_gate=bool(_get(t, "attn_output_gate", False)),
            num_experts=int(_get(t, "num_experts", _get(t, "n_routed_experts", 0))),
            num_experts_per_tok=int(_get(t, "num_experts_per_tok", 0)),
            moe_intermediate_size=int(_get(t, "moe_intermediate_size", 0)),
            shared_expert_intermediate_size=int(_get(t, "shared_expert_intermediate_size", 0)),
            decoder_sparse_step=int(_get(t, "decoder_sparse_step", 1)),
            mlp_only_layers=[int(x) for x in _get(t, "mlp_only_layers", [])],
            layer_types=layer_types,
            linear_conv_kernel_dim=int(_get(t, "linear_conv_kernel_dim", 0)),
            linear_key_head_dim=int(_get(t, "linear_key_head_dim", 0)),
            linear_value_head_dim=int(_get(t, "linear_value_head_dim", 0)),
            linear_num_key_heads=int(_get(t, "linear_num_key_heads", 0)),
            linear_num_value_heads=int(_get(t, "linear_num_value_heads", 0)),
            mamba_ssm_dtype=t.get("mamba_ssm_dtype"),
            mtp_num_hidden_layers=int(_get(t, "mtp_num_hidden_layers", 0)),
            partial_rotary_factor=float(
                _get(
                    t,
                    "partial_rotary_factor",
                    _get(t.get("rope_parameters") or {}, "partial_rotary_factor", 1.0),
                )
            ),
            has_vision=isinstance(vc, dict),
            vision_params=_vision_params(vc) if isinstance(vc, dict) else 0,
            quantization=quant,
            checkpoint_bytes=checkpoint_bytes,
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"The config.json of {source} has a field of the wrong type ({exc}).",
            hint="Re-download config.json; llmdeck reads numbers where the model card promises numbers.",
        ) from exc


def read_config_file(path: Path) -> dict[str, Any]:
    """Read and parse one config.json, turning every failure into a ConfigError (exit 2)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ModelPathError(
            f"{path} does not exist.", hint="Point llmdeck at a model folder that holds config.json."
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {path}: {exc}.", hint="Check the file and its permissions.") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).",
            hint="The download was probably cut short; fetch config.json again.",
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object.", hint="Fetch config.json again.")
    return data


def read_index_total_size(model_dir: Path) -> int | None:
    """``metadata.total_size`` of ``model.safetensors.index.json``, or the size of a lone safetensors file."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
            size = data.get("metadata", {}).get("total_size")
            if isinstance(size, int | float) and size > 0:
                return int(size)
        except (OSError, json.JSONDecodeError, AttributeError):
            return None
    single = model_dir / "model.safetensors"
    if single.is_file() and not single.is_symlink():
        return single.stat().st_size
    if single.is_symlink() and single.exists():
        return single.resolve().stat().st_size
    return None


def facts_from_dir(model_dir: Path) -> ModelFacts:
    """Facts of a local model folder (config.json + optional safetensors index)."""
    model_dir = Path(model_dir)
    config = model_dir / "config.json"
    if not model_dir.is_dir():
        raise ModelPathError(
            f"{model_dir} is not a folder.", hint="Pass a model folder, a catalog name or a repo id."
        )
    if not config.is_file():
        raise ModelPathError(
            f"{model_dir} has no config.json, so it is not a Hugging Face model folder.",
            hint="Download the model (or just its config.json) into that folder first.",
        )
    return facts_from_config(
        read_config_file(config), source=str(model_dir), checkpoint_bytes=read_index_total_size(model_dir)
    )
