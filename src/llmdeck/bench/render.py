"""Rendering results: the seeds' table (one row per scenario) and the details behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.bench.models import BenchResult, ScenarioResult, Stats

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
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


def summary_table(result: BenchResult) -> Table:
    """One row per scenario: ok/failed, mean and P99 TTFT, mean TPOT, output tok/s, verdict."""
    from rich.table import Table

    t = result.target
    title = f"llmdeck bench: {t.model} at {t.base_url}"
    if t.server_version:
        title += f" (server {t.server_version})"
    table = Table(title=title, title_justify="left")
    for col in ("Scenario", "OK / failed", "Mean TTFT", "P99 TTFT", "Mean TPOT", "Output tok/s", "Verdict"):
        table.add_column(
            col, overflow="fold", justify="right" if col not in {"Scenario", "Verdict"} else "left"
        )
    for sr in result.scenarios:
        table.add_row(*scenario_row(sr))
    return table


def details_table(result: BenchResult) -> Table:
    """Per scenario: peaks (exact and vLLM-compatible), queue time, server and host state."""
    from rich.table import Table

    table = Table(title="Details", title_justify="left")
    for col in (
        "Scenario",
        "Peak conc. (vLLM-compat)",
        "Peak out tok/s (vLLM-compat)",
        "Mean ITL",
        "Client queue mean",
        "Server: running/waiting max, KV max, prefix hit, preempt",
        "Host: MemAvailable min, swap max, GPU mem",
    ):
        table.add_column(col, overflow="fold")
    for sr in result.scenarios:
        m = sr.metrics
        if m is None:
            continue
        s = sr.server_metrics
        if s is None or s.samples == 0:
            server = (s.note if s else None) or "not sampled"
        else:
            parts = [
                f"{_n(s.running_max)}/{_n(s.waiting_max)}",
                f"KV {_pct(s.kv_cache_usage_max_pct)}",
                f"hit {_pct(s.prefix_cache_hit_rate_pct)}",
                f"preempt {_n(s.preemptions)}",
            ]
            if s.generation_tokens_per_s is not None:
                parts.append(f"gen {s.generation_tokens_per_s:.0f} tok/s")
            server = ", ".join(parts)
        h = sr.host
        host = "-"
        if h is not None:
            gpu = "; ".join(
                f"GPU{g.index} {g.note}"
                if g.used_gib_max is None
                else f"GPU{g.index} {g.used_gib_max:.1f} GiB"
                for g in h.gpus
            ) or (h.gpu_note or "no GPU")
            host = f"{_gib(h.mem_available_gib_min)}, swap {_gib(h.swap_used_gib_max)}, {gpu}"
        table.add_row(
            sr.spec.label(),
            f"{m.peak_concurrency} ({m.vllm_compatible_peak_concurrent_requests})",
            f"{m.peak_output_tokens_per_s:.0f} ({m.vllm_compatible_peak_output_tokens_per_s:.0f})",
            fmt_ms(_mean(m.itl_ms)),
            fmt_ms(_mean(m.queue_time_ms)),
            server,
            host,
        )
    return table


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
    if details and any(sr.metrics for sr in result.scenarios):
        console.print(details_table(result))
        for line in verdict_lines(result):
            console.print(f"[dim]{line}[/]", highlight=False)
    if result.status != "complete":
        console.print(f"[bold yellow]run {result.status}[/]: {result.error or ''}", highlight=False)


def renderables(result: BenchResult) -> list[RenderableType]:
    return [summary_table(result), details_table(result)]


def _n(v: float | None) -> str:
    return "n/r" if v is None else f"{v:g}"


def _pct(v: float | None) -> str:
    return "n/r" if v is None else f"{v:.0f}%"


def _gib(v: float | None) -> str:
    return "n/r" if v is None else f"{v:.1f} GiB"
