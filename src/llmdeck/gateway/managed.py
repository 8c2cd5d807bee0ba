"""Backends the gateway starts on demand: a launch spec (``llmdeck plan … --spec-out``) instead of a URL.

Config (in a route's ``backends:``, and a top-level ``budget:``)::

    routes:
      - model: coder
        backends:
          - spec: coder.json        # relative to this file; `llmdeck plan MODEL --spec-out coder.json`
            keep: false             # true: never evicted to make room
            ttl_s: 600              # stopped after 10 idle minutes (default: only when room is needed)
            group: agents           # members of one group are never evicted for each other
            memory_gib: 20          # optional: declare the footprint instead of the plan's estimate
            sleep_level: 1          # opt-in vLLM sleep mode (GPU engines only) instead of stop/start
            min_resident_s: 30      # once ready and in use, not evicted for another this long (0: off)
    budget:
      memory_gib: auto              # or a number of GiB the managed models may use together
      reserve_gib: 4                # auto: MemAvailable (or the GPU's free memory) less this
      kind: auto                    # unified (MemAvailable) | gpu (NVML free memory of gpu_index) | auto
      allow_unload_ollama: false    # Ollama's loaded models count against the budget; unload them?
      queue: {max_waiting: 32, wait_s: 900}

The resolution (reading the spec, validating sleep mode, estimating the footprint) happens when the
config is loaded, so every error names the config file and line (exit 2) before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmdeck.engines import get as get_engine
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import ConfigError, LlmdeckError
from llmdeck.formats.gateway_yaml import MarkedDocument

SLEEP_FLAG = "--enable-sleep-mode"
MIN_RESIDENT_S = 30.0  # the default minimum residency: a start costs tens of seconds, so serve a while
SLEEP_ENV = "VLLM_SERVER_DEV_MODE"  # vLLM serves /sleep, /wake_up, /is_sleeping only in dev mode


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class QueueSettings(_Strict):
    max_waiting: int = Field(32, ge=1, le=10000, description="Requests that may wait for one model.")
    wait_s: float = Field(900.0, gt=0, le=7200, description="How long a request waits for its model.")
    failed_retry_s: float = Field(
        30.0, ge=0, le=3600, description="After a failed start, requests fail at once for this long."
    )


class Budget(_Strict):
    memory_gib: Literal["auto"] | Annotated[float, Field(gt=0, le=65536)] = Field(
        "auto", description="'auto' or the GiB the managed models (and Ollama's) may hold together."
    )
    reserve_gib: float = Field(2.0, ge=0, le=4096, description="auto: kept free for the OS and others.")
    kind: Literal["auto", "unified", "gpu"] = Field(
        "auto",
        description="unified memory (MemAvailable), one GPU's memory, or auto: gpu where NVML "
        "reports the GPU's memory, else unified (GB10, the CPU engine).",
    )
    gpu_index: int = Field(0, ge=0, le=63, description="kind gpu: the GPU whose memory is the budget.")
    allow_unload_ollama: bool = Field(False, description="Unload Ollama's models to make room.")
    queue: QueueSettings = Field(default_factory=QueueSettings)


def resolve_kind(budget: Budget) -> Budget:
    """``kind: auto`` made concrete: gpu where NVML reports the GPU's memory, else unified."""
    if budget.kind != "auto":
        return budget
    from llmdeck.runtime.host import nvml_snapshot

    report = nvml_snapshot()
    gpu = report.available and not report.memory_not_supported and bool(report.gpus)
    return budget.model_copy(update={"kind": "gpu" if gpu else "unified"})


@dataclass(frozen=True)
class Footprint:
    """A model's memory: what it needs running (bytes) and how that was found."""

    bytes: int
    how: str
    weights: int = 0  # of which weights and KV cache (what sleep mode may free), when known
    kv: int = 0

    def sleeping(self, level: int, kind: str) -> int:
        """The estimate while asleep: level 1 keeps the weights in host memory (the same pool on
        unified memory), level 2 drops them; the KV cache goes either way. (Awaits measurement.)"""
        kept = self.weights if (level == 1 and kind == "unified") else 0
        return max(0, self.bytes - self.weights - self.kv) + kept


@dataclass(frozen=True)
class ManagedBackend:
    """A backend started by the gateway: its launch spec and its lifecycle settings."""

    spec: LaunchSpec
    spec_file: Path
    planned: Footprint
    keep: bool = False
    ttl_s: float | None = None
    group: str | None = None
    sleep_level: int | None = None
    start_timeout_s: float | None = None
    min_resident_s: float = MIN_RESIDENT_S

    @property
    def name(self) -> str:
        return self.spec.name


def resolve_managed(
    entry: Any, doc: MarkedDocument, loc: tuple[str | int, ...], source: Path, budget: Budget
) -> ManagedBackend:
    """Read the spec the backend names and check it; :class:`ConfigError` names the config line."""
    from llmdeck.engines.spec import read_spec_file

    where = doc.where((*loc, "spec"))
    path = Path(entry.spec).expanduser()
    path = path if path.is_absolute() else (source.parent / path)
    try:
        spec = read_spec_file(path)
    except LlmdeckError as exc:
        raise ConfigError(f"{where}: {exc.message}", hint=exc.hint) from exc
    if entry.sleep_level is not None:
        spec = _with_sleep_mode(spec, where)
    planned = _footprint(entry, spec, budget, where)
    return ManagedBackend(
        spec=spec,
        spec_file=path,
        planned=planned,
        keep=entry.keep,
        ttl_s=entry.ttl_s or None,
        group=entry.group,
        sleep_level=entry.sleep_level,
        start_timeout_s=entry.start_timeout_s,
        min_resident_s=MIN_RESIDENT_S if entry.min_resident_s is None else entry.min_resident_s,
    )


def _with_sleep_mode(spec: LaunchSpec, where: str) -> LaunchSpec:
    """Sleep mode needs a GPU engine; ``--enable-sleep-mode`` and dev mode are added when missing."""
    if not get_engine(spec.engine).can_sleep:
        raise ConfigError(
            f"{where}: `sleep_level` needs vLLM's sleep mode, which the CPU engine does not have (vLLM: "
            "'Sleep mode is not supported on current platform'; only CUDA, ROCm and XPU builds sleep).",
            hint="Drop `sleep_level:` for a CPU-engine spec (it is stopped and started instead), or use a "
            "GPU engine's spec (`llmdeck plan … --engine venv|docker --spec-out FILE`).",
        )
    args = list(spec.vllm_args)
    if SLEEP_FLAG not in args:
        args.append(SLEEP_FLAG)
    env = {**spec.env, SLEEP_ENV: "1"}
    return spec.model_copy(update={"vllm_args": args, "env": env})


def _footprint(entry: Any, spec: LaunchSpec, budget: Budget, where: str) -> Footprint:
    from llmdeck.gateway.footprint import plan_footprint

    gib = 1 << 30
    if entry.memory_gib is not None:
        return Footprint(int(entry.memory_gib * gib), "declared (memory_gib)")
    try:
        return plan_footprint(spec, budget.kind)
    except LlmdeckError as exc:
        raise ConfigError(
            f"{where}: cannot estimate the memory of {spec.name!r} ({exc.message.rstrip('.')}).",
            hint="Declare it on the backend with `memory_gib: N`.",
        ) from exc


def check_managed(backends: list[tuple[ManagedBackend, str]]) -> None:
    """Names and ports must differ between managed backends (each becomes its own server); the same
    spec with the same settings may serve several aliases (one server, e.g. two sets of defaults)."""
    names: dict[str, tuple[ManagedBackend, str]] = {}
    ports: dict[int, tuple[ManagedBackend, str]] = {}
    for backend, where in backends:
        spec = backend.spec
        if spec.name in names and names[spec.name][0] == backend:
            continue  # another alias of the same model
        if spec.name in names:
            same_spec = names[spec.name][0].spec == spec
            raise ConfigError(
                f"{where}: the spec's server name {spec.name!r} is also the one at {names[spec.name][1]}"
                + (
                    " with other settings (keep, ttl_s, group, memory_gib, sleep_level, min_resident_s)."
                    if same_spec
                    else "."
                ),
                hint="Give every spec its own name (`llmdeck plan … --name N --spec-out FILE`), or the same "
                "settings where one model serves several aliases.",
            )
        if spec.port in ports:
            raise ConfigError(
                f"{where}: port {spec.port} is also the port of the spec at {ports[spec.port][1]}.",
                hint="Give every spec its own port (`llmdeck plan … --port P --spec-out FILE`).",
            )
        names[spec.name] = ports[spec.port] = (backend, where)
