"""The tune's data: what was asked (:class:`TuneRequest`), the trials file's header and records, and
the progress events the CLI renders. Versioned: ``TRIALS_SCHEMA_VERSION`` changes on breaking edits."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.bench.request import MAX_CONCURRENCY, MAX_PROMPTS, MAX_TOKENS, MAX_TURNS
from llmdeck.engines.spec import LaunchSpec
from llmdeck.tune.slo import SloTarget

TRIALS_SCHEMA_VERSION = 1
TRIALS_KIND = "llmdeck.tune.trials"
TRIAL_KIND = "llmdeck.tune.trial"
TuneWorkload = Literal["agent", "multi-user", "long-context", "prompts"]
DeepGemmWarmup = Literal["skip", "relax", "full", "off"]
ParamValue = str | int | float | bool | None
# vLLM's defaults, a --candidate, the sampler's, a re-run of one of them (--confirm), a re-run of a
# leader or a contender whose goodputs still overlap (adaptive repeats, --max-repeats)
Origin = Literal["default", "given", "search", "confirm", "recheck"]


class RateSweep(BaseModel):
    """--find-max-rate: each trial steps the arrival rate (geometric steps from ``start``, ``factor``
    apart, then a bisection) and keeps the highest rate that meets the SLOs, in at most ``max_steps``
    bench runs; the bisection stops when the bracket is within ``resolution`` (0.1: 10%)."""

    start: float = Field(1.0, gt=0, allow_inf_nan=False)
    factor: float = Field(2.0, gt=1, le=16, allow_inf_nan=False)
    max_steps: int = Field(8, ge=2, le=30)
    resolution: float = Field(0.1, gt=0, lt=1)


class LoadShape(BaseModel):
    """The workload at its target load (closed loop: ``concurrency`` requests in flight)."""

    # bench's bounds: a trial's bench refuses more, so a tune must refuse it before the first start
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    input_len: int = Field(ge=1, le=MAX_TOKENS)
    output_len: int = Field(ge=1, le=MAX_TOKENS)
    prefix_len: int = Field(0, ge=0, le=MAX_TOKENS)
    num_turns: int = Field(4, ge=1, le=MAX_TURNS)
    num_prompts: int = Field(ge=1, le=MAX_PROMPTS)
    warmup: int = Field(ge=0, le=MAX_PROMPTS)
    repeat: int = Field(1, ge=1, le=20)
    rate_sweep: RateSweep | None = Field(None, description="--find-max-rate: a rate sweep per trial.")


class TuneRequest(BaseModel):
    """Everything `llmdeck tune` was asked (the API key is never part of it)."""

    base: LaunchSpec
    model_ref: str = Field(description="What plan resolves: a model folder, a config.json or a catalog name.")
    machine: str = "auto"
    workload: TuneWorkload
    prompts: Path | None = None
    load: LoadShape
    slo: list[SloTarget] = Field(min_length=1)
    budget_s: float = Field(gt=0, allow_inf_nan=False)
    trials: int = Field(ge=1, le=500)
    seed: int = Field(0, ge=0, le=2**32 - 1, description="optuna's sampler takes 0 .. 2**32-1")
    vllm_version: str | None = None
    deep_gemm_warmup: DeepGemmWarmup = "relax"
    candidates: list[list[str]] = Field(default_factory=list, description="Configs measured first.")
    ready_timeout_s: float = Field(1800.0, gt=0, allow_inf_nan=False)
    confirm: int = Field(0, ge=0, le=10, description="Re-run the best N configs and the defaults once more.")
    max_repeats: int = Field(
        3, ge=1, le=20, description="Adaptive repeats: the most measured trials of one config (1: off)."
    )
    secret_env: dict[str, str] = Field(
        default_factory=dict, exclude=True, repr=False, description="--api-key & co.: never written."
    )

    def fingerprint(self) -> str:
        """What must match for a trials file to be resumed: model, engine, base flags, workload, SLOs."""
        same = {
            "model": self.base.model,
            "engine": self.base.engine,
            "base_args": self.base.vllm_args,
            "base_env": sorted(self.base.env),
            "machine": self.machine,
            "workload": self.workload,
            "prompts": str(self.prompts) if self.prompts else None,
            # a tune without a rate sweep keeps the fingerprint it had before the option existed
            "load": self.load.model_dump(exclude={"rate_sweep"} if self.load.rate_sweep is None else None),
            "slo": [t.model_dump() for t in self.slo],
        }
        return hashlib.sha256(json.dumps(same, sort_keys=True).encode()).hexdigest()[:16]


class Dimension(BaseModel):
    """One axis of the search: a vLLM flag (or an engine variable) and the values tried."""

    name: str
    values: list[ParamValue] = Field(min_length=1)
    why: str = ""


class TrialsHeader(BaseModel):
    """The first line of a trials file."""

    kind: str = TRIALS_KIND
    schema_version: int = TRIALS_SCHEMA_VERSION
    llmdeck_version: str = __version__
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    fingerprint: str
    request: TuneRequest
    space: list[Dimension]
    notes: list[str] = Field(default_factory=list, description="What the space leaves out, and why.")
    environment: dict[str, Any] = Field(default_factory=dict)
    defaults: dict[str, ParamValue] = Field(
        default_factory=dict, description="vLLM's own value on each axis for this model (from plan)."
    )


class RateStep(BaseModel):
    """One step of a rate sweep: the arrival rate asked for, and what it measured."""

    rate: float
    goodput: float
    meets_slo: bool
    slo_values_ms: dict[str, float | None] = Field(default_factory=dict)
    bench_file: str | None = None


class TrialMetrics(BaseModel):
    """One trial's numbers (medians over its repeats), as `vllm bench serve` defines them."""

    goodput: float = Field(description="Requests/s within every per-request SLO (vLLM's goodput).")
    request_throughput: float
    output_throughput: float
    completed: int
    failed: int
    slo_values_ms: dict[str, float | None] = Field(default_factory=dict, description="Each SLO's statistic.")
    runs: int = 1
    goodput_runs: list[float] = Field(default_factory=list)
    max_rate: float | None = Field(
        None,
        description="--find-max-rate: the highest arrival rate (requests/s; sessions/s for "
        "session workloads) that met the SLOs; None when none did or no sweep ran.",
    )
    rate_steps: list[RateStep] = Field(default_factory=list, description="--find-max-rate: each step.")


class TrialRecord(BaseModel):
    """One line of the trials file after its header: a candidate and what became of it."""

    kind: str = TRIAL_KIND
    number: int
    params: dict[str, ParamValue]
    origin: Origin = "search"
    args: list[str] = Field(default_factory=list, description="The vLLM flags of this trial.")
    env: dict[str, str] = Field(default_factory=dict, description="Engine variables set by the tune.")
    status: Literal["ok", "rejected", "failed"]
    reason: str = ""
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    startup_s: float | None = None
    bench_s: float | None = None
    metrics: TrialMetrics | None = None
    meets_slo: bool = False
    bench_file: str | None = None
    repeat_of: int | None = Field(None, description="confirm: the trial whose config this re-runs.")
    log_file: str | None = Field(None, description="The engine's log, in the tune's folder.")
    start_phases: dict[str, float] = Field(
        default_factory=dict, description="Seconds of the start per phase, from the log (tune.startcost)."
    )

    @property
    def score(self) -> float:
        """What the search maximizes: goodput; a failed or rejected trial scores 0."""
        return self.metrics.goodput if self.metrics is not None else 0.0


EventKind = Literal[
    "begin", "resume", "trial", "rejected", "service", "bench", "result", "failed", "budget", "done"
]


class TuneEvent(BaseModel):
    kind: EventKind
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


TuneEvents = Callable[[TuneEvent], None]


class Comparison(BaseModel):
    """The leader against one contender (the runner-up, vLLM's defaults, a --candidate): their
    per-run goodputs, and whether their ranges (min..max) are apart."""

    leader: int
    other: int
    other_origin: Origin
    leader_runs: list[float]
    other_runs: list[float]
    separated: bool


class NoiseDecision(BaseModel):
    """How the winner was picked when runs were repeated (see llmdeck.tune.noise)."""

    rule: str
    leader: int = Field(description="The config with the best median goodput (its first trial).")
    chosen: int = Field(description="The config written to spec.json (its first trial).")
    within_noise: bool = Field(description="The leader never separated from at least one contender.")
    tied: list[int] = Field(default_factory=list, description="The leader and the contenders it ties.")
    comparisons: list[Comparison] = Field(default_factory=list)
    stopped_by: Literal["separated", "max-repeats", "budget", "off", "unknown"] = "separated"
    message: str = ""


class TuneResult(BaseModel):
    """What `llmdeck tune --json` prints."""

    out_dir: str
    trials_file: str
    spec_file: str | None
    report_file: str | None
    resumed: int = Field(0, description="Trials read back from an earlier, interrupted run.")
    ran: int = Field(0, description="Trials run (started or rejected) in this run.")
    best: TrialRecord | None
    best_runs: list[float] = Field(
        default_factory=list, description="Goodput of each run of the best config."
    )
    trials: list[TrialRecord]
    stopped_by: Literal["trials", "budget", "space"]
    noise: NoiseDecision | None = Field(
        None, description="Adaptive repeats: whether the winner is told apart from its contenders."
    )


class TuneReport(BaseModel):
    """What `llmdeck report TRIALS --json` prints: a tune's trials read back and the config it chose."""

    trials_file: str
    best: TrialRecord | None
    best_runs: list[float] = Field(default_factory=list)
    noise: NoiseDecision | None = None
    trials: list[TrialRecord]
