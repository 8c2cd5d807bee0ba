"""One llmdeck scenario next to a `vllm bench serve` result file (``--save-result``): the same
metrics side by side with their ratio, and every way the two workloads differ.

Both compute TTFT, TPOT, ITL, E2EL and the throughputs the same way (``metrics.py``), so on the
same workload the ratios should be near 1; a ratio far from 1 with the workloads listed as equal
points at the server (load, age, warm-up), not at the definitions. vLLM's own peak concurrency
is compared with llmdeck's vLLM-compatible value, not with the exact one (vLLM's overcounts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmdeck.bench.models import BenchResult, ScenarioMetrics, ScenarioResult, Stats
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
    llmdeck: float | None
    vllm: float | None
    ratio: float | None = Field(None, description="llmdeck / vllm")
    note: str = ""


class Comparison(BaseModel):
    """What `llmdeck report RESULT --against VLLM.json` shows."""

    llmdeck_file: str
    vllm_file: str
    scenario: str
    rows: list[CompareRow]
    workload_differences: list[str] = Field(
        default_factory=list, description="Ways the two runs' workloads differ; empty = same shape."
    )


def load_vllm_result(path: Path) -> VllmBenchResult:
    """Read a `vllm bench serve` result file. Raises ResultFileError (exit 2) with what is wrong."""
    from llmdeck.bench.report import first_problem, read_json_file

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


def pick_scenario(result: BenchResult, peer: VllmBenchResult, name: str | None) -> ScenarioResult:
    """The scenario to compare: by name, the only measured one, or the one whose shape matches."""
    measured = [s for s in result.scenarios if s.metrics is not None]
    names = ", ".join(s.spec.name for s in measured) or "none"
    if name is not None:
        for s in result.scenarios:
            if s.spec.name == name:
                if s.metrics is None:
                    raise UsageError(
                        f"Scenario {name!r} has no measurements ({s.status}).",
                        hint=f"Pick a measured one: {names}.",
                    )
                return s
        raise UsageError(f"The result has no scenario {name!r}.", hint=f"Its measured scenarios: {names}.")
    if not measured:
        raise UsageError("The result has no measured scenario to compare.", hint="Run the bench again.")
    if len(measured) == 1:
        return measured[0]
    same = [s for s in measured if not _differences(s, peer)]
    if len(same) == 1:
        return same[0]
    raise UsageError(
        f"The result holds {len(measured)} measured scenarios and {len(same) or 'none'} match the vLLM "
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


def _rows(m: ScenarioMetrics, peer: VllmBenchResult) -> list[CompareRow]:
    rows: list[CompareRow] = []

    def add(metric: str, ours: float | None, theirs: float | None, note: str = "") -> None:
        if ours is None and theirs is None:
            return
        ratio = ours / theirs if ours is not None and theirs else None
        rows.append(CompareRow(metric=metric, llmdeck=ours, vllm=theirs, ratio=ratio, note=note))

    for key, stats in (("ttft", m.ttft_ms), ("tpot", m.tpot_ms), ("itl", m.itl_ms), ("e2el", m.e2el_ms)):
        # the percentiles vLLM reported (--metric-percentiles; 99 by default): ours has them all
        theirs_pcts = {k.split("_", 1)[0] for k in peer.model_extra or {} if k.endswith(f"_{key}_ms")}
        pcts = {p for p in theirs_pcts if p.startswith("p") and _is_number(p[1:])}
        which = ["mean", "median", *sorted(pcts, key=lambda p: float(p[1:]))]
        for w in which:
            theirs = peer.value(f"{w}_{key}_ms")
            ours = _stat(stats, w)
            if theirs is None and key == "e2el":
                continue  # vLLM reports E2EL only when asked (--percentile-metrics)
            add(f"{w} {key.upper()} (ms)", ours, theirs)
    add("request throughput (req/s)", m.request_throughput, peer.request_throughput)
    add("output throughput (tok/s)", m.output_throughput, peer.output_throughput)
    add("total token throughput (tok/s)", m.total_token_throughput, peer.total_token_throughput)
    add("duration (s)", m.duration_s, peer.duration)
    add(
        "peak concurrent requests (vLLM's way)",
        float(m.vllm_compatible_peak_concurrent_requests),
        peer.value("max_concurrent_requests"),
        note=f"exact: {m.peak_concurrency}",
    )
    add(
        "peak output tok/s (vLLM's way)",
        m.vllm_compatible_peak_output_tokens_per_s,
        peer.value("max_output_tokens_per_s"),
        note=f"exact: {m.peak_output_tokens_per_s:g}",
    )
    return rows


def compare(
    result: BenchResult,
    peer: VllmBenchResult,
    *,
    scenario: str | None = None,
    llmdeck_file: str = "",
    vllm_file: str = "",
) -> Comparison:
    sc = pick_scenario(result, peer, scenario)
    assert sc.metrics is not None
    return Comparison(
        llmdeck_file=llmdeck_file,
        vllm_file=vllm_file,
        scenario=sc.spec.name,
        rows=_rows(sc.metrics, peer),
        workload_differences=_differences(sc, peer),
    )


def render_comparison(cmp: Comparison, console: Any) -> None:
    """The comparison as a rich table, the workload differences under it."""
    from rich.table import Table

    t = Table(title=f"{cmp.scenario}: llmdeck vs vllm bench serve")
    for col, just in (("metric", "left"), ("llmdeck", "right"), ("vllm bench serve", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    t.add_column("ratio", justify="right")
    t.add_column("", justify="left")
    for r in cmp.rows:
        t.add_row(
            r.metric,
            "-" if r.llmdeck is None else f"{r.llmdeck:.3f}",
            "-" if r.vllm is None else f"{r.vllm:.3f}",
            "-" if r.ratio is None else f"{r.ratio:.3f}",
            r.note,
        )
    console.print(t)
    if cmp.workload_differences:
        console.print("The workloads differ, so the ratios compare different runs:")
        for d in cmp.workload_differences:
            console.print(f"  - {d}", highlight=False)
    else:
        console.print("Same workload shape (requests, rate, concurrency, endpoint, tokens per request).")
