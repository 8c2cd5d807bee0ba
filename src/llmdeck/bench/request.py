"""One bench run's arguments as one model (like guidellm's one args model per run).

The CLI fills a :class:`BenchRequest` from its options; :func:`build_scenarios` turns it into the
scenarios to run and :func:`build_options` into the runner's options; the result file embeds the
request (``BenchResult.request``), so a result says exactly what was asked. The API key is never
part of it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, ValidationError, field_serializer

from llmdeck.bench.result_schema import ScenarioSpec
from llmdeck.errors import UsageError

if TYPE_CHECKING:
    from llmdeck.bench.runner import BenchOptions

REQUEST_SCHEMA_VERSION = 1
Workload = Literal["random", "shared-prefix", "multi-turn", "agent-sessions", "jsonl"]

# Bounds of what a bench builds and sends: past them the run would only end in MemoryError (every
# prompt is built in memory before the first request) or never, so they are exit 2 up front.
MAX_PROMPTS = 100_000  # requests (or warmup requests) per scenario; `vllm bench serve` runs use 1000s
MAX_TOKENS = 10_000_000  # one prompt's or reply's tokens: the longest context any model has (10M)
MAX_PROMPT_TOKENS = 500_000_000  # all prompts of a scenario together (about 2.5 GB of text)
MAX_CONCURRENCY = 100_000  # client-side in-flight requests (each holds a connection)
MAX_TURNS = 10_000
MAX_DURATION_S = 30 * 86400.0
Concurrency = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]


class RequestTimeouts(BaseModel):
    connect: float = Field(10.0, gt=0, allow_inf_nan=False)
    read: float = Field(600.0, gt=0, allow_inf_nan=False)
    total: float = Field(1800.0, gt=0, allow_inf_nan=False)
    probe: float = Field(30.0, gt=0, allow_inf_nan=False)


def _unlimited_rates() -> list[float | None]:
    return [None]  # None: all at once (vLLM's inf)


def _unlimited_concurrency() -> list[int | None]:
    return [None]


class BenchRequest(BaseModel):
    """What `llmdeck bench` was asked to do (every option but the API key)."""

    schema_version: int = REQUEST_SCHEMA_VERSION
    target: str
    suite: str | None = None
    model: str | None = None
    tokenizer: str | None = None
    workload: Workload = "random"
    prompts: Path | None = None
    endpoint: Literal["completions", "chat"] = "completions"
    input_len: int = Field(512, ge=1, le=MAX_TOKENS)
    output_len: int = Field(256, ge=1, le=MAX_TOKENS)
    num_prompts: int | None = Field(None, ge=1, le=MAX_PROMPTS)
    range_ratio: float = Field(0.0, ge=0, lt=1)
    prefix_len: int = Field(2048, ge=0, le=MAX_TOKENS)
    num_turns: int = Field(4, ge=1, le=MAX_TURNS)
    request_rates: list[float | None] = Field(default_factory=_unlimited_rates, min_length=1)
    max_concurrencies: list[Concurrency | None] = Field(default_factory=_unlimited_concurrency, min_length=1)
    burstiness: float = Field(1.0, gt=0, allow_inf_nan=False)
    warmup: int = Field(0, ge=0, le=MAX_PROMPTS)
    duration_s: float | None = Field(None, gt=0, le=MAX_DURATION_S, allow_inf_nan=False)
    seed: int = Field(0, ge=0, le=2**63 - 1, description="numpy's generator takes no negative seed")
    ignore_eos: bool = True
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    slo: list[str] = Field(default_factory=list)
    goodput: list[str] = Field(default_factory=list)
    timeouts: RequestTimeouts = Field(default_factory=RequestTimeouts)
    metrics_interval_s: float = Field(1.0, gt=0, allow_inf_nan=False)
    scrape_metrics: bool = True
    repeat: int = Field(1, ge=1, le=100)
    out: Path | None = None
    html: Path | None = None

    @field_serializer("target")
    def _target_out(self, target: str) -> str:
        """A URL's password never reaches a result file (the run is written with this request)."""
        from llmdeck.util.redact import redact_url

        return redact_url(target)

    def normalized(self) -> BenchRequest:
        """A prompt file means the jsonl workload; multi-turn and agent-sessions talk chat."""
        update: dict[str, object] = {}
        if self.prompts is not None:
            update["workload"] = "jsonl"
        if (update.get("workload") or self.workload) in ("multi-turn", "agent-sessions"):
            update["endpoint"] = "chat"
        return self.model_copy(update=update) if update else self


def sampling_of(req: BenchRequest) -> dict[str, float | int]:
    given = {"temperature": req.temperature, "top_p": req.top_p, "top_k": req.top_k}
    return {k: v for k, v in given.items() if v is not None}


def _pool_size(req: BenchRequest, rate: float | None) -> int:
    if req.num_prompts:
        return req.num_prompts
    if req.duration_s is None:
        return 20
    # a pool of prompts, reused in turn when the duration outlasts it
    return min(4096, int(rate * req.duration_s * 1.2) + 8) if rate and math.isfinite(rate) else 256


def _scenario(req: BenchRequest, rate: float | None, conc: int | None) -> ScenarioSpec:
    try:
        return ScenarioSpec(
            name=f"{req.workload}-{req.input_len}-{req.output_len}",
            workload=req.workload,
            endpoint=req.endpoint,
            input_len=req.input_len,
            output_len=req.output_len,
            num_prompts=_pool_size(req, rate),
            range_ratio=req.range_ratio,
            request_rate=rate,
            burstiness=req.burstiness,
            max_concurrency=conc,
            warmup=req.warmup,
            duration_s=req.duration_s,
            prefix_len=req.prefix_len if req.workload in ("shared-prefix", "agent-sessions") else 0,
            num_turns=req.num_turns,
            jsonl_path=req.prompts,
            ignore_eos=req.ignore_eos,
            seed=req.seed,
            temperature=req.temperature,
            top_p=req.top_p,
            top_k=req.top_k,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-") if first.get("loc") else "a flag"
        raise UsageError(
            f"Invalid bench parameters: {flag} {first.get('input')!r}: "
            f"{str(first['msg']).removeprefix('Value error, ')}.",
            hint="See `llmdeck bench --help`.",
        ) from exc


def build_scenarios(req: BenchRequest) -> list[ScenarioSpec]:
    """The scenarios of a request: a named suite, or the sweep of rates x concurrencies; then
    ``repeat`` rounds of them."""
    from llmdeck.bench.repeats import expand_repeats
    from llmdeck.bench.suites import get_suite

    req = req.normalized()
    scenarios: list[ScenarioSpec] = []
    if req.suite:
        scenarios = get_suite(req.suite)
        for k, s in enumerate(scenarios):
            s.seed = req.seed + k  # a seed per scenario: none reuses an earlier one's prompts (prefix cache)
            if req.warmup:
                s.warmup = req.warmup
            for key, value in sampling_of(req).items():
                setattr(s, key, value)
    else:
        sweep = len(req.request_rates) * len(req.max_concurrencies) > 1
        for rate in req.request_rates:
            for conc in req.max_concurrencies:
                spec = _scenario(req, rate, conc)
                if sweep:
                    spec.name += f"-r{rate or 'inf'}-c{conc or 'inf'}"
                    spec.seed = req.seed + len(scenarios)  # fresh prompts per sweep point (no cache reuse)
                scenarios.append(spec)
    for spec in scenarios:
        _check_prompt_tokens(spec)
    return expand_repeats(scenarios, req.repeat)


def _check_prompt_tokens(spec: ScenarioSpec) -> None:
    """Every prompt of a scenario (and of its warmup) is built in memory before it starts: their
    tokens together are bounded, so a run too large to hold is exit 2 now, not a MemoryError later."""
    if spec.workload == "jsonl":
        return  # the prompts are the file's, read within its own size limit
    count = spec.num_prompts + spec.warmup
    each = math.ceil(spec.input_len * (1 + spec.range_ratio)) + spec.prefix_len
    if count * each > MAX_PROMPT_TOKENS:
        raise UsageError(
            f"The bench would build {count:,} prompts of up to {each:,} tokens ({count * each:,} tokens) "
            f"in memory for {spec.name}; at most {MAX_PROMPT_TOKENS:,} tokens are allowed.",
            hint="Use a smaller --num-prompts (or --warmup), --input-len or --prefix-len.",
        )


def build_options(
    req: BenchRequest, *, out_path: Path, api_key: str | None, lock_dir: Path | None = None
) -> BenchOptions:
    """The runner's options for a request (verdict rules, goodput SLOs, timeouts, monitoring)."""
    from llmdeck.bench.metrics import parse_goodput
    from llmdeck.bench.runner import BenchOptions
    from llmdeck.bench.verdict import parse_slo
    from llmdeck.client.types import Timeouts

    try:
        goodput_ms = parse_goodput(req.goodput)
    except ValueError as exc:
        raise UsageError(str(exc), hint="Write --goodput ttft:500 (milliseconds).") from exc
    t = req.timeouts
    return BenchOptions(
        slo=parse_slo(req.slo),
        goodput_slos_ms=goodput_ms,
        timeouts=Timeouts(connect=t.connect, read=t.read, total=t.total, probe=t.probe),
        monitor_interval_s=req.metrics_interval_s,
        scrape_metrics=req.scrape_metrics,
        out_path=out_path,
        api_key=api_key,
        request=req.model_dump(mode="json"),
        lock_dir=lock_dir,
    )
