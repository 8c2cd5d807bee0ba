"""Rendering results: the seeds' table (one row per scenario) and the details behind it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from llmdeck.bench.repeats import summarize_repeats
from llmdeck.bench.result_schema import BenchResult, RepeatSummary, ScenarioResult, Stats
from llmdeck.bench.turns import ttft_by_turn
from llmdeck.util.redact import redact_url
from llmdeck.util.safetext import markup_data

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _mean(s: Stats | None) -> float | None:
    return s.mean if s else None


def _p99(s: Stats | None) -> float | None:
    return s.p(99) if s else None


def scenario_row(sr: ScenarioResult) -> list[str]:
    label = sr.spec.label()
    if sr.status == "skipped":
        return [label, "skipped", "-", "-", "-", "-", sr.skip_reason or "skipped"]
    m = sr.metrics
    if m is None:
        return [label, sr.status, "-", "-", "-", "-", sr.error or sr.status]
    verdict = sr.verdict.label if sr.verdict else "-"
    if sr.status in {"failed", "interrupted"}:
        verdict = f"{sr.status}: {sr.error or ''}; {verdict}"
    return [
        label,
        f"{m.completed} / {m.failed}",
        fmt_ms(_mean(m.ttft_ms)),
        fmt_ms(_p99(m.ttft_ms)),
        fmt_ms(_mean(m.tpot_ms)),
        f"{m.output_throughput:.1f}",
        verdict,
    ]


def _age(delta: timedelta) -> str:
    s = max(0.0, delta.total_seconds())
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def summary_table(result: BenchResult) -> Table:
    """One row per scenario: ok/failed, mean and P99 TTFT, mean TPOT, output tok/s, verdict."""
    from rich.table import Table

    t = result.target
    title = f"llmdeck bench: {markup_data(t.model)} at {markup_data(redact_url(t.base_url))}"
    about = [f"server {markup_data(t.server_version)}"] if t.server_version else []
    if t.server_started_at:
        about.append(f"up {_age(result.created_at - t.server_started_at)} at the start")
    if about:
        title += f" ({', '.join(about)})"
    table = Table(title=title, title_justify="left")
    for col in ("Scenario", "OK / failed", "Mean TTFT", "P99 TTFT", "Mean TPOT", "Output tok/s", "Verdict"):
        table.add_column(
            col, overflow="fold", justify="right" if col not in {"Scenario", "Verdict"} else "left"
        )
    for sr in result.scenarios:
        table.add_row(*(markup_data(cell) for cell in scenario_row(sr)))  # names, errors: data
    return table


def _range_cell(summary: RepeatSummary, key: str, fmt: Callable[[float], str]) -> str:
    sp = summary.metrics.get(key)
    if sp is None:
        return "-"
    return f"{fmt(sp.median)} ({fmt(sp.min)}-{fmt(sp.max)}, {sp.range_pct:.0f}%)"


def repeats_table(result: BenchResult) -> Table | None:
    """With --repeat: per scenario, each metric's median over its runs, (min-max, range in % of the
    median). None when nothing was repeated."""
    from rich.table import Table

    summaries = result.repeats or summarize_repeats(result)
    if not summaries:
        return None
    table = Table(
        title="Run to run: median over the runs (min-max, range as % of the median); "
        "a difference smaller than the range is not shown to be real",
        title_justify="left",
    )
    cols = ("Scenario", "Runs", "Mean TTFT", "P99 TTFT", "Mean TPOT", "Output tok/s", "Server's own TTFT")
    for col in cols:
        table.add_column(col, overflow="fold", justify="left" if col == "Scenario" else "right")
    for su in summaries:
        table.add_row(
            markup_data(su.label),
            f"{su.runs_measured} of {su.runs_planned}",
            _range_cell(su, "mean_ttft_ms", fmt_ms),
            _range_cell(su, "p99_ttft_ms", fmt_ms),
            _range_cell(su, "mean_tpot_ms", _short_ms),
            _range_cell(su, "output_throughput", lambda v: f"{v:.1f}"),
            _range_cell(su, "server_mean_ttft_ms", fmt_ms),
        )
    return table


def detail_lines(result: BenchResult) -> list[str]:
    """Per scenario: exact peaks (vLLM-compatible values labelled), ITL, client queue time, the
    server's /metrics over the run and the host's memory. Unknown values print as "n/r" (not
    reported), never as 0."""
    lines: list[str] = []
    for sr in result.scenarios:
        m = sr.metrics
        if m is None:
            continue
        compat_conc = m.vllm_compatible_peak_concurrent_requests
        lines.append(
            f"{sr.spec.name}: peak concurrency {m.peak_concurrency} (vLLM-compatible {compat_conc}), "
            f"peak output {m.peak_output_tokens_per_s:.0f} tok/s (vLLM-compatible "
            f"{m.vllm_compatible_peak_output_tokens_per_s:.0f}), mean ITL {fmt_ms(_mean(m.itl_ms))}, "
            f"mean E2EL {fmt_ms(_mean(m.e2el_ms))}, "
            f"client queue mean {fmt_ms(_mean(m.queue_time_ms))} (not in TTFT)"
        )
        by_turn = ttft_by_turn(sr)
        if by_turn:
            turns = " · ".join(f"{t + 1}: {fmt_ms(ms)}" for t, ms in by_turn.items())
            lines.append(f"  median TTFT by turn: {turns}")
        s = sr.server_metrics
        if s is None or s.samples == 0:
            lines.append(f"  server: {(s.note if s else None) or 'not sampled'}")
        else:
            parts = [
                f"running max {_n(s.running_max)}",
                f"waiting max {_n(s.waiting_max)} (last {_n(s.waiting_last)})",
                f"KV cache max {_pct(s.kv_cache_usage_max_pct)}",
                f"prefix-cache hit {_pct(s.prefix_cache_hit_rate_pct)}",
                f"preemptions {_n(s.preemptions)}",
                f"prompt {_rate(s.prompt_tokens_per_s)}",
                f"generation {_rate(s.generation_tokens_per_s)}",
            ]
            if s.server_mean_ttft_ms is not None:
                own = f"own mean TTFT {_fine_ms(s.server_mean_ttft_ms)}"
                if m.ttft_ms is not None:
                    own += f" (client adds {m.ttft_ms.mean - s.server_mean_ttft_ms:+.1f} ms)"
                parts.append(own)
            if s.server_mean_itl_ms is not None:
                parts.append(f"own mean ITL {_fine_ms(s.server_mean_itl_ms)}")
            lines.append(f"  server ({s.engine or '?'} /metrics, {s.samples} samples): " + ", ".join(parts))
        h = sr.host
        if h is not None:
            gpu = "; ".join(
                f"GPU{g.index} {g.name}: {g.note}"
                if g.used_gib_max is None
                else f"GPU{g.index} max {g.used_gib_max:.1f} GiB"
                for g in h.gpus
            ) or (h.gpu_note or "no GPU")
            lines.append(
                f"  host: MemAvailable min {_gib(h.mem_available_gib_min)}, "
                f"swap used max {_gib(h.swap_used_gib_max)}, "
                f"page cache max {_gib(h.page_cache_gib_max)}, {gpu}"
            )
    return lines


def verdict_lines(result: BenchResult) -> list[str]:
    """The numbers behind each verdict: one line per rule checked."""
    lines: list[str] = []
    for sr in result.scenarios:
        if sr.verdict is None:
            continue
        parts = []
        for c in sr.verdict.checks:
            if c.value is None:
                parts.append(f"{c.rule}: not measured")
                continue
            mark = "ok" if c.passed else "FAIL"
            if c.unit == "s":
                parts.append(f"{c.rule} {fmt_ms(c.value * 1000)} <= {fmt_ms(c.limit * 1000)} {mark}")
            elif c.rule == "output_throughput":
                parts.append(f"{c.rule} {c.value:.1f} >= {c.limit:g} {mark}")
            elif c.rule == "waiting_drains":
                parts.append(f"waiting drains (mean {c.value:.1f}) {mark}")
            else:
                parts.append(f"{c.rule} {c.value:g} <= {c.limit:g} {mark}")
        lines.append(f"{sr.spec.name}: " + ", ".join(parts))
    return lines


def render_result(result: BenchResult, console: Console, *, details: bool = True) -> None:
    """Print the summary table (and details, verdict rules, status) to ``console``."""
    console.print(summary_table(result))
    spread = repeats_table(result)
    if spread is not None:
        console.print(spread)
    if details and any(sr.metrics for sr in result.scenarios):
        for line in detail_lines(result):
            console.print(line, highlight=False, markup=False)
        for line in verdict_lines(result):
            console.print(f"[dim]{markup_data(line)}[/]", highlight=False)
    if result.status != "complete":
        status, error = markup_data(result.status), markup_data(result.error or "")
        console.print(f"[bold yellow]run {status}[/]: {error}", highlight=False)


def _short_ms(ms: float) -> str:
    return f"{ms:.2f}ms" if ms < 10 else fmt_ms(ms)


def _fine_ms(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _n(v: float | None) -> str:
    return "n/r" if v is None else f"{v:g}"


def _pct(v: float | None) -> str:
    return "n/r" if v is None else f"{v:.0f}%"


def _rate(v: float | None) -> str:
    return "n/r" if v is None else f"{v:.0f} tok/s"


def _gib(v: float | None) -> str:
    return "n/r" if v is None else f"{v:.1f} GiB"
