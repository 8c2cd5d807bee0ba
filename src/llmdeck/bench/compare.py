"""One llmdeck scenario next to a `vllm bench serve` result file (``--save-result``): the same
metrics side by side with their ratio, and every way the two workloads differ.

Several runs on either side (``llmdeck bench --repeat N``, several ``--against`` files) compare as
medians: each metric's median over llmdeck's runs next to its median over vLLM's files, with every
run's value kept, the way the agreement benchmark compares the two tools (benchmarks/README.md).

Both compute TTFT, TPOT, ITL, E2EL and the throughputs the same way (``metrics.py``), so on the
same workload the ratios should be near 1; a ratio far from 1 with the workloads listed as equal
points at the server (load, age, warm-up), not at the definitions. vLLM's own peak concurrency
is compared with llmdeck's vLLM-compatible value, not with the exact one (vLLM's overcounts).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llmdeck.bench.result_schema import BenchResult, ScenarioMetrics, ScenarioResult, Stats
from llmdeck.errors import ResultFileError, UsageError


class VllmBenchResult(BaseModel):
    """The fields of a `vllm bench serve --save-result` file that llmdeck compares against."""

    model_config = ConfigDict(extra="allow")

    backend: str | None = None
    endpoint_type: str | None = None
    model_id: str | None = None
    num_prompts: int | None = None
    request_rate: float | str | None = None
    burstiness: float | None = None
    max_concurrency: int | None = None
    duration: float
    completed: int
    failed: int | None = None
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    max_concurrent_requests: int | None = None
    max_output_tokens_per_s: float | None = None
    mean_ttft_ms: float
    median_ttft_ms: float | None = None
    mean_tpot_ms: float
    median_tpot_ms: float | None = None
    mean_itl_ms: float
    median_itl_ms: float | None = None

    @model_validator(mode="after")
    def _measured_numbers(self) -> VllmBenchResult:
        """Durations, counts, rates and times are finite and not negative: a file saying otherwise was
        not written by `vllm bench serve` (or was edited), and a comparison with it would mislead."""
        fields = {**{k: getattr(self, k) for k in type(self).model_fields}, **(self.model_extra or {})}
        for key, v in fields.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{key} is {v}: a measured number is finite and not negative")
        return self

    def value(self, key: str) -> float | None:
        """A field by its vLLM name, declared or not (``p99_ttft_ms``, ``mean_e2el_ms``, ...)."""
        v = getattr(self, key, None)
        if v is None and self.model_extra:
            v = self.model_extra.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    @property
    def rate(self) -> float | None:
        """Arrivals per second; None = all at once (vLLM writes "inf")."""
        r = self.request_rate
        if r is None or (isinstance(r, str) and r.lower() == "inf"):
            return None
        try:
            return float(r)
        except ValueError:
            return None


class CompareRow(BaseModel):
    metric: str
    llmdeck: float | None = Field(description="The value; with several runs, their median.")
    vllm: float | None = Field(description="The value; with several files, their median.")
    ratio: float | None = Field(None, description="llmdeck / vllm")
    note: str = ""
    llmdeck_runs: list[float] = Field(default_factory=list, description="Each run's value, when several.")
    vllm_runs: list[float] = Field(default_factory=list, description="Each file's value, when several.")


class Comparison(BaseModel):
    """What `llmdeck report RESULT --against VLLM.json [--against ...]` shows."""

    llmdeck_file: str
    vllm_files: list[str]
    scenario: str
    llmdeck_runs: int = Field(1, description="llmdeck runs compared (--repeat): medians when more than 1.")
    vllm_runs: int = Field(1, description="vLLM result files compared: medians when more than 1.")
    rows: list[CompareRow]
    workload_differences: list[str] = Field(
        default_factory=list, description="Ways the two runs' workloads differ; empty = same shape."
    )


def load_vllm_result(path: Path) -> VllmBenchResult:
    """Read a `vllm bench serve` result file. Raises ResultFileError (exit 2) with what is wrong."""
    from llmdeck.formats.result_file import first_problem, read_json_file

    p = Path(path)
    hint = "Pass the JSON that `vllm bench serve --save-result` wrote (--result-dir / --result-filename)."
    data = read_json_file(p, hint)
    if isinstance(data, dict) and data.get("kind"):
        raise ResultFileError(
            f"{p} is an llmdeck file ({data.get('kind')}), not a `vllm bench serve` result.", hint=hint
        )
    try:
        return VllmBenchResult.model_validate(data)
    except ValidationError as exc:
        what = f"{p} is not a `vllm bench serve` result: {first_problem(exc)}."
        raise ResultFileError(what, hint=hint) from exc


def pick_runs(
    result: BenchResult, peer: VllmBenchResult, name: str | None
) -> tuple[str, list[ScenarioResult]]:
    """The scenario to compare and its measured runs (several with --repeat): by name (a scenario,
    or one run of a repeated one as ``NAME#R``), the only measured one, or the one whose shape
    matches the vLLM run."""
    units: dict[str, list[ScenarioResult]] = {}
    for s in result.scenarios:
        if s.metrics is not None:
            units.setdefault(s.spec.repeat_of or s.spec.name, []).append(s)
    names = ", ".join(units) or "none"
    if name is not None:
        if name in units:
            return name, units[name]
        for s in result.scenarios:
            if name in (s.spec.name, s.spec.repeat_of):
                if s.metrics is None:
                    raise UsageError(
                        f"Scenario {name!r} has no measurements ({s.status}).",
                        hint=f"Pick a measured one: {names}.",
                    )
                return name, [s]
        raise UsageError(f"The result has no scenario {name!r}.", hint=f"Its measured scenarios: {names}.")
    if not units:
        raise UsageError("The result has no measured scenario to compare.", hint="Run the bench again.")
    if len(units) == 1:
        return next(iter(units.items()))
    same = [k for k, runs in units.items() if not _differences(runs[0], peer)]
    if len(same) == 1:
        return same[0], units[same[0]]
    raise UsageError(
        f"The result holds {len(units)} measured scenarios and {len(same) or 'none'} match the vLLM "
        "run's shape.",
        hint=f"Choose one with --scenario: {names}.",
    )


def _per_request(total: int, n: int) -> float | None:
    return total / n if n else None


def _differences(sc: ScenarioResult, peer: VllmBenchResult) -> list[str]:
    m = sc.metrics
    assert m is not None
    spec = sc.spec
    out: list[str] = []

    def differ(what: str, ours: Any, theirs: Any, none: str = "") -> None:
        if ours != theirs:
            a, b = (none if x is None and none else x for x in (ours, theirs))
            out.append(f"{what}: llmdeck {a}, vLLM {b}")

    differ("completed requests", m.completed, peer.completed)
    differ("request rate (req/s)", spec.request_rate, peer.rate, none="inf (all at once)")
    if spec.request_rate is not None and peer.rate is not None and peer.burstiness is not None:
        differ("burstiness", spec.burstiness, peer.burstiness)
    differ("max concurrency", spec.max_concurrency, peer.max_concurrency, none="unlimited")
    chat = (peer.endpoint_type or peer.backend or "").endswith("chat")
    if peer.endpoint_type or peer.backend:
        differ("endpoint", spec.endpoint, "chat" if chat else "completions")
    for what, ours_total, theirs_total in (
        ("input tokens per request", m.total_input_tokens, peer.total_input_tokens),
        ("output tokens per request", m.total_output_tokens, peer.total_output_tokens),
    ):
        a, b = _per_request(ours_total, m.completed), _per_request(theirs_total, peer.completed)
        if a is not None and b is not None and abs(a - b) > 0.5:
            out.append(f"{what}: llmdeck {a:.1f}, vLLM {b:.1f}")
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _stat(s: Stats | None, which: str) -> float | None:
    if s is None:
        return None
    if which == "mean":
        return s.mean
    if which == "median":
        return s.median
    return s.p(float(which[1:]))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _rows(ours: list[ScenarioMetrics], peers: list[VllmBenchResult]) -> list[CompareRow]:
    rows: list[CompareRow] = []

    def add(metric: str, mine: list[float | None], theirs: list[float | None], note: str = "") -> None:
        a = [v for v in mine if v is not None]
        b = [v for v in theirs if v is not None]
        if not a and not b:
            return
        m, t = _median(a), _median(b)
        ratio = m / t if m is not None and t else None
        rows.append(
            CompareRow(
                metric=metric,
                llmdeck=m,
                vllm=t,
                ratio=ratio,
                note=note,
                llmdeck_runs=a if len(ours) > 1 else [],
                vllm_runs=b if len(peers) > 1 else [],
            )
        )

    first = peers[0]
    for key, attr in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2el_ms")):
        # the percentiles vLLM reported (--metric-percentiles; 99 by default): ours has them all
        theirs_pcts = {k.split("_", 1)[0] for k in first.model_extra or {} if k.endswith(f"_{key}_ms")}
        pcts = {p for p in theirs_pcts if p.startswith("p") and _is_number(p[1:])}
        for w in ["mean", "median", *sorted(pcts, key=lambda p: float(p[1:]))]:
            theirs = [peer.value(f"{w}_{key}_ms") for peer in peers]
            if key == "e2el" and all(v is None for v in theirs):
                continue  # vLLM reports E2EL only when asked (--percentile-metrics)
            add(f"{w} {key.upper()} (ms)", [_stat(getattr(m, attr), w) for m in ours], theirs)
    add(
        "request throughput (req/s)",
        [m.request_throughput for m in ours],
        [p.request_throughput for p in peers],
    )
    add(
        "output throughput (tok/s)", [m.output_throughput for m in ours], [p.output_throughput for p in peers]
    )
    add(
        "total token throughput (tok/s)",
        [m.total_token_throughput for m in ours],
        [p.total_token_throughput for p in peers],
    )
    add("duration (s)", [m.duration_s for m in ours], [p.duration for p in peers])
    add(
        "peak concurrent requests (vLLM's way)",
        [float(m.vllm_compatible_peak_concurrent_requests) for m in ours],
        [p.value("max_concurrent_requests") for p in peers],
        note="exact: " + ", ".join(str(m.peak_concurrency) for m in ours),
    )
    add(
        "peak output tok/s (vLLM's way)",
        [m.vllm_compatible_peak_output_tokens_per_s for m in ours],
        [p.value("max_output_tokens_per_s") for p in peers],
        note="exact: " + ", ".join(f"{m.peak_output_tokens_per_s:g}" for m in ours),
    )
    return rows


def compare(
    result: BenchResult,
    peers: list[VllmBenchResult],
    *,
    scenario: str | None = None,
    llmdeck_file: str = "",
    vllm_files: list[str] | None = None,
) -> Comparison:
    """A scenario (all its runs, with --repeat) against one or more `vllm bench serve` results."""
    if not peers:
        raise UsageError("Nothing to compare against.", hint="Pass --against VLLM_RESULT.json.")
    name, runs = pick_runs(result, peers[0], scenario)
    differences: list[str] = []
    for run in runs:
        for peer in peers:
            differences += [d for d in _differences(run, peer) if d not in differences]
    return Comparison(
        llmdeck_file=llmdeck_file,
        vllm_files=vllm_files or [],
        scenario=name,
        llmdeck_runs=len(runs),
        vllm_runs=len(peers),
        rows=_rows([r.metrics for r in runs if r.metrics is not None], peers),
        workload_differences=differences,
    )


HEADLINE = ("mean TTFT (ms)", "mean TPOT (ms)", "mean ITL (ms)", "output throughput (tok/s)")


def render_comparison(cmp: Comparison, console: Any) -> None:
    """The comparison as a rich table, the workload differences under it."""
    from rich.table import Table

    from llmdeck.util.safetext import markup_data

    several = cmp.llmdeck_runs > 1 or cmp.vllm_runs > 1
    scenario = markup_data(cmp.scenario)  # names and notes from result files: data, not markup
    title = f"{scenario}: llmdeck vs vllm bench serve"
    if several:
        title = (
            f"{scenario}: llmdeck (median of {cmp.llmdeck_runs} run(s)) vs vllm bench serve "
            f"(median of {cmp.vllm_runs} run(s))"
        )
    t = Table(title=title)
    for col, just in (("metric", "left"), ("llmdeck", "right"), ("vllm bench serve", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    t.add_column("ratio", justify="right")
    t.add_column("", justify="left")
    for r in cmp.rows:
        note = r.note
        if several and r.metric in HEADLINE:  # every run of the four headline metrics (all in --json)
            runs = [f"{who} " + " / ".join(f"{v:.1f}" for v in vals) for who, vals in
                    (("llmdeck", r.llmdeck_runs), ("vLLM", r.vllm_runs)) if vals]  # fmt: skip
            note = "; ".join([*runs, note] if note else runs)
        t.add_row(
            markup_data(r.metric),
            "-" if r.llmdeck is None else f"{r.llmdeck:.3f}",
            "-" if r.vllm is None else f"{r.vllm:.3f}",
            "-" if r.ratio is None else f"{r.ratio:.3f}",
            markup_data(note or ""),
        )
    console.print(t)
    if cmp.workload_differences:
        console.print("The workloads differ, so the ratios compare different runs:")
        for d in cmp.workload_differences:
            console.print(f"  - {markup_data(d)}", highlight=False)
    else:
        console.print("Same workload shape (requests, rate, concurrency, endpoint, tokens per request).")
