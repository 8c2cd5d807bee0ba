"""The run page's view model: every number the page shows, computed from a result file, with the JSON
path it came from (``src``: ``FILE:dotted.path`` into what `llmdeck report --json` prints), so a test
can check that the page shows the same numbers as the JSON."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.bench.html.series import Cdf, Series, cdf, per_request_ms, tokens_per_s, ttft_over_time
from llmdeck.bench.result_schema import BenchResult, ScenarioResult, Stats, Timeline
from llmdeck.bench.tables import fmt_ms

# How each kind of number is written on the page (the summary table uses the terminal's fmt_ms).
FORMATS: dict[str, Callable[[float], str]] = {
    "ms": fmt_ms,
    "ms2": lambda v: f"{v:.2f} ms" if v < 100 else f"{v:.1f} ms",
    "rate": lambda v: f"{v:.1f}",
    "rate2": lambda v: f"{v:.2f}",
    "pct": lambda v: f"{v:.1f}%",
    "gib": lambda v: f"{v:.1f} GiB",
    "int": lambda v: f"{v:.0f}",
    "s": lambda v: f"{v:.1f} s",
}
METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"))


class Num(BaseModel):
    """A number as shown: its value, its text (``FORMATS[fmt]``), and where it is in the JSON."""

    value: float | None
    text: str
    fmt: str
    src: str | None = None


def num(value: float | None, fmt: str, src: str | None = None) -> Num:
    return Num(value=value, text="-" if value is None else FORMATS[fmt](value), fmt=fmt, src=src)


class Chart(BaseModel):
    """A drawn chart: inline SVG, and how many data points went into it (0 = nothing to draw)."""

    title: str
    svg: str
    points: int
    note: str = ""
    caption: bool = Field(True, description="False when the SVG has its own title.")


class MetricDist(BaseModel):
    key: str
    name: str
    n: int
    mean: Num
    p50: Num
    p90: Num
    p99: Num
    cdf: Cdf


class Fact(BaseModel):
    label: str
    value: Num | None = None
    text: str = ""


class Check(BaseModel):
    rule: str
    value: str
    limit: str
    passed: bool | None
    says: str


class ScenarioView(BaseModel):
    anchor: str
    index: int
    name: str
    label: str
    description: str = ""
    status: str
    ok_failed: str
    summary: list[Num] = Field(description="Mean TTFT, P99 TTFT, mean TPOT, output tok/s (as the table).")
    verdict: str
    verdict_passed: bool | None = None
    dists: list[MetricDist] = Field(default_factory=list)
    throughput: list[Fact] = Field(default_factory=list)
    server: list[Fact] = Field(default_factory=list)
    host: list[Fact] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    ttft_series: Series = Field(default_factory=Series)
    tps_series: Series = Field(default_factory=Series)
    timeline: Timeline | None = None
    missing: list[str] = Field(default_factory=list, description="What this result does not have.")
    charts: list[Chart] = Field(default_factory=list, description="Filled by the page renderer.")


class RepeatRow(BaseModel):
    label: str
    runs: str
    cells: list[tuple[str, Num, Num, Num, Num]] = Field(description="(metric, median, min, max, range %)")


class RunView(BaseModel):
    file: str
    title: str
    status: str
    error: str | None = None
    created_at: str
    env: dict[str, str]
    slo: str
    scenarios: list[ScenarioView]
    repeats: list[RepeatRow] = Field(default_factory=list)


def _stats_nums(s: Stats, src: str) -> tuple[Num, Num, Num, Num]:
    def pct(q: str) -> Num:
        return num(s.percentiles.get(q), "ms2", f"{src}.percentiles.{q}" if q in s.percentiles else None)

    return num(s.mean, "ms2", f"{src}.mean"), pct("p50"), pct("p90"), pct("p99")


def _dists(sr: ScenarioResult, base: str) -> list[MetricDist]:
    m = sr.metrics
    if m is None:
        return []
    values = per_request_ms(sr.requests)
    out = []
    for key, name in METRICS:
        s: Stats | None = getattr(m, f"{key}_ms")
        if s is None:
            continue
        mean, p50, p90, p99 = _stats_nums(s, f"{base}.metrics.{key}_ms")
        out.append(
            MetricDist(key=key, name=name, n=s.n, mean=mean, p50=p50, p90=p90, p99=p99, cdf=cdf(values[key]))
        )
    return out


def _throughput(sr: ScenarioResult, base: str) -> list[Fact]:
    m = sr.metrics
    if m is None:
        return []
    p = f"{base}.metrics"
    facts = [
        Fact(label="Duration", value=num(m.duration_s, "s", f"{p}.duration_s")),
        Fact(label="Requests/s", value=num(m.request_throughput, "rate2", f"{p}.request_throughput")),
        Fact(label="Output tok/s", value=num(m.output_throughput, "rate", f"{p}.output_throughput")),
        Fact(label="Total tok/s", value=num(m.total_token_throughput, "rate", f"{p}.total_token_throughput")),
        Fact(
            label="Peak output tok/s (1-s window)",
            value=num(m.peak_output_tokens_per_s, "rate", f"{p}.peak_output_tokens_per_s"),
        ),
        Fact(label="Peak concurrency (exact)", value=num(m.peak_concurrency, "int", f"{p}.peak_concurrency")),
    ]
    if m.request_goodput is not None:
        slos = ", ".join(f"{k} ≤ {v:g} ms" for k, v in m.goodput_slos_ms.items())
        facts.append(
            Fact(
                label=f"Goodput req/s ({slos})", value=num(m.request_goodput, "rate2", f"{p}.request_goodput")
            )
        )
    if m.queue_time_ms is not None:
        q = num(m.queue_time_ms.mean, "ms2", f"{p}.queue_time_ms.mean")
        facts.append(Fact(label="Client queue, mean (not in TTFT)", value=q))
    return facts


def _server(sr: ScenarioResult, base: str) -> list[Fact]:
    s = sr.server_metrics
    if s is None or s.samples == 0:
        return [Fact(label="/metrics", text=(s.note if s else None) or "not sampled")]
    p = f"{base}.server_metrics"
    rows: list[tuple[str, float | None, str, str]] = [
        ("Running, max", s.running_max, "int", "running_max"),
        ("Waiting, max", s.waiting_max, "int", "waiting_max"),
        ("Waiting, last sample", s.waiting_last, "int", "waiting_last"),
        ("KV cache usage, max", s.kv_cache_usage_max_pct, "pct", "kv_cache_usage_max_pct"),
        ("Prefix-cache hit rate", s.prefix_cache_hit_rate_pct, "pct", "prefix_cache_hit_rate_pct"),
        ("Preemptions", s.preemptions, "int", "preemptions"),
        ("Server's own mean TTFT", s.server_mean_ttft_ms, "ms2", "server_mean_ttft_ms"),
        ("Server's own mean ITL", s.server_mean_itl_ms, "ms2", "server_mean_itl_ms"),
    ]
    facts = [
        Fact(label="Samples", text=f"{s.samples} from {s.engine or '?'} /metrics every {s.interval_s:g} s")
    ]
    for label, value, fmt, key in rows:
        if value is None:
            facts.append(Fact(label=label, text="not reported"))
        else:
            facts.append(Fact(label=label, value=num(value, fmt, f"{p}.{key}")))
    if s.waiting_never_drained:
        facts.append(Fact(label="Waiting queue", text="never drained in the second half of the run"))
    return facts


def _host(sr: ScenarioResult, base: str) -> list[Fact]:
    h = sr.host
    if h is None:
        return [Fact(label="Host memory", text="not sampled")]
    p = f"{base}.host"
    rows = [
        ("MemAvailable, min", h.mem_available_gib_min, "mem_available_gib_min"),
        ("MemAvailable at the start", h.mem_available_gib_start, "mem_available_gib_start"),
        ("Page cache, max", h.page_cache_gib_max, "page_cache_gib_max"),
        ("Swap used, max", h.swap_used_gib_max, "swap_used_gib_max"),
    ]
    facts = [
        Fact(label=label, value=num(v, "gib", f"{p}.{key}"))
        if v is not None
        else Fact(label=label, text="n/r")
        for label, v, key in rows
    ]
    for i, g in enumerate(h.gpus):
        if g.used_gib_max is None:
            facts.append(Fact(label=f"GPU{g.index} {g.name}", text=g.note or "not reported"))
        else:
            facts.append(
                Fact(
                    label=f"GPU{g.index} used, max",
                    value=num(g.used_gib_max, "gib", f"{p}.gpus.{i}.used_gib_max"),
                )
            )
    if not h.gpus and h.gpu_note:
        facts.append(Fact(label="GPU memory", text=h.gpu_note))
    return facts


def _checks(sr: ScenarioResult) -> list[Check]:
    if sr.verdict is None:
        return []
    out = []
    for c in sr.verdict.checks:
        if c.unit == "s":
            value = "-" if c.value is None else fmt_ms(c.value * 1000)
            limit = f"≤ {fmt_ms(c.limit * 1000)}"
        elif c.rule == "output_throughput":
            value, limit = ("-" if c.value is None else f"{c.value:.1f}"), f"≥ {c.limit:g}"
        elif c.rule == "waiting_drains":
            value = "-" if c.value is None else f"mean {c.value:.1f}"
            limit = "drains"
        else:
            value, limit = ("-" if c.value is None else f"{c.value:g}"), f"≤ {c.limit:g}"
        out.append(Check(rule=c.rule, value=value, limit=limit, passed=c.passed, says=c.says))
    return out


def _missing(sr: ScenarioResult) -> list[str]:
    out = []
    if sr.metrics is not None and not sr.requests:
        out.append("no per-request timings in this result: no distributions or time series")
    if sr.metrics is not None and sr.timeline is None:
        out.append(
            "no timeline samples (a result from before llmdeck recorded them): the server and host "
            "sections show the run's summary only"
        )
    return out


def scenario_view(sr: ScenarioResult, index: int, file_no: int = 0) -> ScenarioView:
    base = f"{file_no}:scenarios.{index}"
    m = sr.metrics
    summary: list[Num] = []
    if m is not None:
        t, tp = m.ttft_ms, m.tpot_ms
        summary = [
            num(t.mean if t else None, "ms", f"{base}.metrics.ttft_ms.mean" if t else None),
            num(t.p(99) if t else None, "ms", f"{base}.metrics.ttft_ms.percentiles.p99" if t else None),
            num(tp.mean if tp else None, "ms", f"{base}.metrics.tpot_ms.mean" if tp else None),
            num(m.output_throughput, "rate", f"{base}.metrics.output_throughput"),
        ]
    verdict = sr.verdict.label if sr.verdict else (sr.skip_reason or sr.error or sr.status)
    if sr.status in {"failed", "interrupted"}:
        verdict = f"{sr.status}: {sr.error or ''}; {verdict}"
    return ScenarioView(
        anchor=f"s{file_no}-{index}",
        index=index,
        name=sr.spec.name,
        label=sr.spec.label(),
        description=sr.spec.description,
        status=sr.status,
        ok_failed=f"{m.completed} / {m.failed}" if m else sr.status,
        summary=summary,
        verdict=verdict,
        verdict_passed=sr.verdict.passed if sr.verdict else None,
        dists=_dists(sr, base),
        throughput=_throughput(sr, base),
        server=_server(sr, base) if m else [],
        host=_host(sr, base) if m else [],
        checks=_checks(sr),
        ttft_series=ttft_over_time(sr.requests),
        tps_series=tokens_per_s(sr.requests),
        timeline=sr.timeline,
        missing=_missing(sr),
    )


def _age(delta: timedelta) -> str:
    s = max(0.0, delta.total_seconds())
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def environment(result: BenchResult) -> dict[str, str]:
    """What the run ran on, as text: the rows of the environment table and of the comparison's diff."""
    t, h = result.target, result.host
    sampling = sorted(
        {", ".join(f"{k}={v:g}" for k, v in s.spec.sampling().items()) for s in result.scenarios}
    )
    env = {
        "Model": t.model,
        "Server": t.base_url + (f" ({t.server_name})" if t.server_name else ""),
        "Server version": t.server_version or "not reported",
        "Server flags": shlex.join(t.server_args)
        if t.server_args
        else "not recorded (server not started by llmdeck)",
        "max_model_len": str(t.max_model_len) if t.max_model_len else "not reported",
        "Server age at the start": _age(result.created_at - t.server_started_at)
        if t.server_started_at
        else "n/r",
        "GPU": ", ".join(h.gpus) or "none seen by NVML",
        "Host": f"{h.hostname}: {h.platform}, {h.cpu_count} CPUs, {h.mem_total_gib} GiB",
        "Sampling": "; ".join(s or "server default" for s in sampling) or "-",
        "llmdeck": result.llmdeck_version,
    }
    return env


def _repeat_rows(result: BenchResult, file_no: int) -> list[RepeatRow]:
    names = {
        "mean_ttft_ms": ("Mean TTFT", "ms"),
        "p99_ttft_ms": ("P99 TTFT", "ms"),
        "mean_tpot_ms": ("Mean TPOT", "ms2"),
        "output_throughput": ("Output tok/s", "rate"),
        "server_mean_ttft_ms": ("Server's own TTFT", "ms"),
    }
    rows = []
    for j, su in enumerate(result.repeats):
        cells = []
        for key, (name, fmt) in names.items():
            sp = su.metrics.get(key)
            if sp is None:
                continue
            p = f"{file_no}:repeats.{j}.metrics.{key}"
            cells.append(
                (
                    name,
                    num(sp.median, fmt, f"{p}.median"),
                    num(sp.min, fmt, f"{p}.min"),
                    num(sp.max, fmt, f"{p}.max"),
                    num(sp.range_pct, "pct", f"{p}.range_pct"),
                )
            )
        rows.append(RepeatRow(label=su.label, runs=f"{su.runs_measured} of {su.runs_planned}", cells=cells))
    return rows


def run_view(result: BenchResult, file: str, file_no: int = 0) -> RunView:
    t = result.target
    title = f"{t.model} at {t.base_url}"
    slo = ", ".join(f"{k}={v:g}" for k, v in result.slo.items()) or "none"
    return RunView(
        file=file,
        title=title,
        status=result.status,
        error=result.error,
        created_at=result.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        env=environment(result),
        slo=slo,
        scenarios=[scenario_view(sr, i, file_no) for i, sr in enumerate(result.scenarios)],
        repeats=_repeat_rows(result, file_no),
    )


def json_value(data: Any, path: str) -> Any:
    """The value at a dotted ``path`` (list indices as numbers) in JSON data: what ``src`` points at."""
    cur = data
    for part in path.split("."):
        cur = cur[int(part)] if isinstance(cur, list) else cur[part]
    return cur
