"""Pydantic models of bench specs and results (the versioned JSON written by `llmdeck bench`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_serializer, model_validator

from llmdeck import __version__

BENCH_SCHEMA_VERSION = 1
BENCH_RESULT_KIND = "llmdeck.bench.result"

Workload = Literal["random", "shared-prefix", "multi-turn", "agent-sessions", "jsonl"]
Endpoint = Literal["completions", "chat"]


class ScenarioSpec(BaseModel):
    """One load scenario: what to send and how fast."""

    name: str
    workload: Workload = "random"
    endpoint: Endpoint = "completions"
    input_len: int = Field(512, ge=1, description="Prompt tokens (random: exact; shared-prefix: suffix).")
    output_len: int = Field(256, ge=1, description="max_tokens per request.")
    num_prompts: int = Field(20, ge=1, description="Requests to send (excluding warmup).")
    range_ratio: float = Field(0.0, ge=0.0, lt=1.0, description="Uniform length spread, like vLLM's.")
    request_rate: float | None = Field(None, gt=0, description="Arrivals per second; None = all at once.")
    burstiness: float = Field(1.0, gt=0, description="Gamma shape; 1 = Poisson.")
    max_concurrency: int | None = Field(None, ge=1, description="Client-side semaphore.")
    warmup: int = Field(0, ge=0, description="Warmup requests, excluded from the metrics.")
    duration_s: float | None = Field(None, gt=0, description="Stop dispatching after this many seconds.")
    prefix_len: int = Field(
        0, ge=0, description="shared-prefix, agent-sessions: tokens of the shared system prompt."
    )
    num_turns: int = Field(4, ge=1, description="multi-turn, agent-sessions: turns per session.")
    jsonl_path: Path | None = None
    ignore_eos: bool = True
    seed: int = 0
    temperature: float | None = Field(
        None,
        ge=0,
        description="Sent with every request; None = the server's default (what `vllm bench serve` does "
        "unless given --temperature; 0 = greedy, the same tokens every time).",
    )
    top_p: float | None = Field(None, gt=0, le=1, description="Sent with every request when set.")
    top_k: int | None = Field(None, ge=-1, description="Sent with every request when set (-1/0: off).")
    description: str = ""
    repeat: int | None = Field(
        None, ge=1, description="With --repeat: which run of the scenario this is (1-based)."
    )
    repeat_of: str | None = Field(
        None, description="With --repeat: the scenario's name without the run suffix."
    )

    def sampling(self) -> dict[str, float | int]:
        """The sampling parameters this scenario sends (only those set), as in the request body."""
        params = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}
        return {k: v for k, v in params.items() if v is not None}

    @property
    def max_context(self) -> int:
        """Longest context a request of this scenario needs (prompt + output)."""
        hi_in = int(self.input_len * (1 + self.range_ratio)) + 1 if self.range_ratio else self.input_len
        hi_out = int(self.output_len * (1 + self.range_ratio)) + 1 if self.range_ratio else self.output_len
        base = hi_in + self.prefix_len
        if self.workload in ("multi-turn", "agent-sessions"):
            base = self.num_turns * (hi_in + hi_out) - hi_out + 16 * self.num_turns
            base += self.prefix_len + 16 if self.workload == "agent-sessions" else 0
        return base + hi_out

    def label(self) -> str:
        unit = "sessions/s" if self.workload in ("multi-turn", "agent-sessions") else "req/s"
        load = f"@{self.request_rate:g} {unit}" if self.request_rate else "@inf"
        if self.max_concurrency:
            load += f" c{self.max_concurrency}"
        extra = ""
        if self.workload == "shared-prefix":
            extra = f" prefix {self.prefix_len}"
        elif self.workload == "multi-turn":
            extra = f" {self.num_turns} turns"
        elif self.workload == "agent-sessions":
            extra = f" prefix {self.prefix_len} {self.num_turns} turns"
        elif self.workload == "jsonl":
            extra = " jsonl"
        if self.temperature is not None:
            extra += f" T={self.temperature:g}"
        if self.repeat is not None:
            extra += f" #{self.repeat}"
        return f"{self.input_len}/{self.output_len} x{self.num_prompts} {load}{extra}"


class RequestRecord(BaseModel):
    """One measured request; times are seconds relative to the scenario's start."""

    index: int
    ok: bool
    error: str | None = None
    error_kind: str | None = Field(None, description="unreachable/http/malformed/timeout/dropped/not_run/...")
    session: int | None = None
    turn: int | None = None
    arrival: float | None = Field(None, description="When the request became due (schedule).")
    start: float | None = Field(None, description="When the POST was sent (after any client queueing).")
    queue_time: float | None = Field(None, description="start - arrival: client-side wait, not in TTFT.")
    ttft: float | None = None
    latency: float | None = Field(None, description="E2EL: last output chunk - start.")
    end: float | None = Field(None, description="When the request finished or failed.")
    itl: list[float] = Field(default_factory=list)
    prompt_len: int = Field(0, description="Prompt tokens the workload built.")
    prompt_tokens: int | None = Field(None, description="usage.prompt_tokens from the server.")
    output_len: int = Field(0, description="max_tokens asked for.")
    output_tokens: int | None = Field(None, description="usage.completion_tokens from the server.")
    num_chunks: int = 0
    finish_reason: str | None = None


class Stats(BaseModel):
    """Distribution of one latency metric in milliseconds (numpy's default percentiles)."""

    n: int
    mean: float
    median: float
    std: float
    percentiles: dict[str, float] = Field(description='e.g. {"p50": .., "p90": .., "p99": ..}')

    def p(self, q: int | float) -> float | None:
        return self.percentiles.get(f"p{q:g}")


class ScenarioMetrics(BaseModel):
    """The numbers `vllm bench serve` prints, plus exact peaks and client queue time."""

    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    request_goodput: float | None = None
    goodput_slos_ms: dict[str, float] = Field(default_factory=dict)
    ttft_ms: Stats | None = None
    tpot_ms: Stats | None = None
    itl_ms: Stats | None = None
    e2el_ms: Stats | None = None
    queue_time_ms: Stats | None = None
    peak_concurrency: int = Field(0, description="Exact: most requests in flight at one instant.")
    peak_output_tokens_per_s: float = Field(0.0, description="Exact: most output tokens in any 1-s window.")
    vllm_compatible_peak_concurrent_requests: int = Field(
        0, description="vLLM's 1-s-bucket count (over-counts; shown only for comparison)."
    )
    vllm_compatible_peak_output_tokens_per_s: float = Field(
        0.0, description="vLLM's 1-s-bucket chunk count (for comparison)."
    )
    output_tokens_from_chunks: int = Field(
        0, description="Requests whose usage was missing (chunk count used)."
    )
    prompt_len_mismatches: int = Field(0, description="Requests where usage.prompt_tokens != built length.")


class ServerMetricsSummary(BaseModel):
    """Deltas and ranges of the server's /metrics over a scenario."""

    engine: str | None = Field(None, description="vllm / sglang / llamacpp, from the metric names seen.")
    samples: int = 0
    interval_s: float = 0.0
    running_max: float | None = None
    running_mean: float | None = None
    waiting_max: float | None = None
    waiting_mean: float | None = None
    waiting_last: float | None = None
    waiting_never_drained: bool | None = None
    kv_cache_usage_max_pct: float | None = None
    prefix_cache_hit_rate_pct: float | None = None
    preemptions: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    server_mean_ttft_ms: float | None = Field(
        None,
        description="The server's own mean TTFT over the run (vLLM's TTFT histogram: request arrival in the "
        "API server to first token), all of its clients; the client's mean TTFT minus this is what HTTP, "
        "SSE and the client add.",
    )
    server_mean_itl_ms: float | None = Field(
        None, description="The server's own mean inter-token latency over the run (vLLM's ITL histogram)."
    )
    not_reported: list[str] = Field(default_factory=list, description="Metrics the server did not expose.")
    note: str | None = None


class GpuMemory(BaseModel):
    index: int
    name: str
    used_gib_max: float | None = None
    total_gib: float | None = None
    note: str | None = Field(None, description='e.g. "not reported by NVML" (GB10); never 0 for unknown.')


class HostSummary(BaseModel):
    """Host memory during a scenario (MemAvailable, swap, page cache, GPU memory)."""

    samples: int = 0
    mem_available_gib_min: float | None = None
    mem_available_gib_start: float | None = None
    swap_used_gib_max: float | None = None
    page_cache_gib_max: float | None = None
    gpus: list[GpuMemory] = Field(default_factory=list)
    gpu_note: str | None = None


class VerdictCheck(BaseModel):
    rule: str
    metric: str
    value: float | None
    limit: float
    unit: str
    passed: bool | None = Field(description="None when the metric is not available.")
    says: str = Field(description="What a failure means, e.g. 'not for multi-user'.")


class Verdict(BaseModel):
    label: str = Field(description='"ok" or the failed rules in words.')
    passed: bool
    checks: list[VerdictCheck] = Field(default_factory=list)


class Timeline(BaseModel):
    """Every sample of a scenario's monitor, on the requests' clock (seconds from the scenario's start;
    a sample before the first request is negative). ``None`` = not reported in that sample, never 0."""

    server_t: list[float] = Field(default_factory=list, description="When each /metrics scrape was read.")
    running: list[float | None] = Field(default_factory=list)
    waiting: list[float | None] = Field(default_factory=list)
    kv_usage_pct: list[float | None] = Field(default_factory=list)
    prefix_hit_rate_pct: list[float | None] = Field(
        default_factory=list, description="Hits / queries since the previous scrape (None: no queries)."
    )
    preemptions: list[float | None] = Field(default_factory=list, description="Since the first scrape.")
    host_t: list[float] = Field(default_factory=list, description="When each host sample was taken.")
    mem_available_gib: list[float | None] = Field(default_factory=list)
    page_cache_gib: list[float | None] = Field(default_factory=list)
    swap_used_gib: list[float | None] = Field(default_factory=list)
    gpu_used_gib: list[list[float | None]] = Field(
        default_factory=list, description="Per GPU (NVML), one value per host sample."
    )

    @model_validator(mode="after")
    def _columns_match_their_clock(self) -> Timeline:
        """Each column has one value per sample of its clock (or none at all): a page drawing it pairs
        them point by point."""
        server = ("running", "waiting", "kv_usage_pct", "prefix_hit_rate_pct", "preemptions")
        host = ("mem_available_gib", "page_cache_gib", "swap_used_gib")
        columns = [(name, getattr(self, name), "server_t") for name in server]
        columns += [(name, getattr(self, name), "host_t") for name in host]
        columns += [(f"gpu_used_gib[{i}]", values, "host_t") for i, values in enumerate(self.gpu_used_gib)]
        for name, values, clock in columns:
            n = len(getattr(self, clock))
            if values and len(values) != n:
                raise ValueError(f"timeline.{name} has {len(values)} values for {n} times in {clock}")
        return self


ScenarioStatus = Literal["pending", "running", "done", "skipped", "failed", "interrupted"]


class ScenarioResult(BaseModel):
    spec: ScenarioSpec
    status: ScenarioStatus = "pending"
    skip_reason: str | None = None
    error: str | None = None
    started_at: datetime | None = None
    metrics: ScenarioMetrics | None = None
    server_metrics: ServerMetricsSummary | None = None
    host: HostSummary | None = None
    verdict: Verdict | None = None
    timeline: Timeline | None = Field(None, description="The monitor's samples (absent in older results).")
    requests: list[RequestRecord] = Field(default_factory=list)


class Spread(BaseModel):
    """One metric over the runs of a repeated scenario."""

    median: float
    min: float
    max: float
    range_pct: float = Field(description="(max - min) / median x 100: how far the runs moved.")


class RepeatSummary(BaseModel):
    """A scenario run several times (``--repeat``): each metric's median and range over its runs."""

    scenario: str = Field(description="The scenario's name without the run suffix.")
    label: str
    runs_planned: int
    runs_measured: int = Field(description="Runs that finished (failed or skipped runs are left out).")
    metrics: dict[str, Spread] = Field(
        default_factory=dict,
        description="By vLLM's names: mean_ttft_ms, p99_ttft_ms, mean_tpot_ms, mean_itl_ms, "
        "output_throughput, and server_mean_ttft_ms (the server's own, when /metrics had it).",
    )


class TargetInfo(BaseModel):
    base_url: str
    server_name: str | None = None
    model: str
    tokenizer: str | None = None
    max_model_len: int | None = None
    server_version: str | None = None
    server_args: list[str] | None = Field(None, description="argv of the server when llmdeck started it.")
    server_started_at: datetime | None = Field(
        None,
        description="When the server's API process started (process_start_time_seconds on /metrics): "
        "a young server can still be warming up.",
    )

    @field_serializer("server_args")
    def _args_out(self, args: list[str] | None) -> list[str] | None:
        """Secrets never reach a result file (or `report --json`): ``--api-key X`` is redacted."""
        from llmdeck.util.redact import redact_argv

        return redact_argv(args) if args is not None else None

    @field_serializer("base_url")
    def _url_out(self, url: str) -> str:
        from llmdeck.util.redact import redact_url

        return redact_url(url)


class HostFacts(BaseModel):
    hostname: str
    platform: str
    python: str
    cpu_count: int | None
    mem_total_gib: float | None
    gpus: list[str] = Field(default_factory=list)


RunStatus = Literal["running", "complete", "interrupted", "aborted"]


class ResultHeader(BaseModel):
    """What every llmdeck result file opens with (bench's and eval's: one model, not copies): its kind
    and schema, who wrote it and when, how the run ended, the server it ran against and the host it ran
    on (the environment), and the options it was run with. A subclass sets ``kind`` and the version."""

    schema_version: int
    kind: str
    llmdeck_version: str = __version__
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    status: RunStatus = "running"
    error: str | None = None
    suite: str | None = None
    target: TargetInfo
    host: HostFacts
    request: dict[str, Any] | None = Field(
        None, description="The options this run was made from (every option but the API key)."
    )


class BenchResult(ResultHeader):
    """The whole result file (``schema_version`` bumps on breaking changes)."""

    schema_version: int = BENCH_SCHEMA_VERSION
    kind: str = BENCH_RESULT_KIND
    slo: dict[str, float] = Field(default_factory=dict, description="Verdict limits in effect.")
    scenarios: list[ScenarioResult] = Field(default_factory=list)
    repeats: list[RepeatSummary] = Field(
        default_factory=list, description="With --repeat: the spread of each scenario's runs."
    )
