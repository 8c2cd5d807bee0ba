"""The tune's HTML page, on the bench report's base (its template, CSS and matplotlib SVG charts):
goodput per config, the Pareto front of throughput against the first SLO's statistic, what mattered,
the space and what it leaves out, the environment. No script, nothing from the network."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from llmdeck import __version__
from llmdeck.bench.html import charts
from llmdeck.bench.html.view import Chart
from llmdeck.tune.outputs import Effect, what_mattered
from llmdeck.tune.schema import NoiseDecision, ParamValue, TrialRecord, TrialsHeader


class Row(BaseModel):
    number: int
    origin: str
    status: str
    label: str
    at_default: list[str] = []
    args: str
    goodput: float | None
    goodput_runs: list[float] = []
    max_rate: float | None = None
    request_throughput: float | None
    output_throughput: float | None
    slo_values: list[str]
    meets: bool
    vs_default: float | None = None
    on_front: bool = False
    best: bool = False
    reason: str = ""
    log: str | None = None
    bench: str | None = None


def pareto_front(points: list[tuple[int, float, float]]) -> set[int]:
    """Trials on the front of (latency: lower is better, throughput: higher is better)."""
    front: set[int] = set()
    for n, x, y in points:
        if not any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for _, x2, y2 in points):
            front.add(n)
    return front


def baseline_goodput(records: list[TrialRecord]) -> float | None:
    """The goodput of vLLM's defaults (the baseline trial), when it was measured."""
    for r in records:
        if r.origin == "default" and r.status == "ok" and r.metrics is not None:
            return r.score
    return None


def _label(rec: TrialRecord, defaults: dict[str, ParamValue]) -> tuple[str, list[str]]:
    """What the trial set away from vLLM's defaults, and the flags it set to vLLM's own value (a
    sampler's trial names every dimension: the page says what it changed, not all it set)."""
    if rec.origin == "default":
        return "vLLM's defaults", []
    same = [k for k, v in rec.params.items() if k in defaults and str(v) == str(defaults[k])]
    changed = ", ".join(f"{k}={v}" for k, v in rec.params.items() if k not in same)
    return changed or "vLLM's defaults, set explicitly", same


def rows(header: TrialsHeader, records: list[TrialRecord], best: TrialRecord | None) -> list[Row]:
    first = header.request.slo[0].key
    pts = [
        (r.number, r.metrics.slo_values_ms.get(first), r.metrics.output_throughput)
        for r in records
        if r.status == "ok" and r.metrics is not None
    ]
    front = pareto_front([(n, x, y) for n, x, y in pts if x is not None])
    base = baseline_goodput(records)
    out = []
    for r in records:
        m = r.metrics
        label, same = _label(r, header.defaults)
        vals = [
            f"{m.slo_values_ms[t.key]:.0f}" if m and m.slo_values_ms.get(t.key) is not None else "-"
            for t in header.request.slo
        ]
        out.append(
            Row(
                number=r.number,
                origin=r.origin,
                status=r.status,
                label=label,
                at_default=same,
                args=" ".join(r.args + [f"{k}={v}" for k, v in r.env.items()]),
                goodput=r.score if m else None,
                goodput_runs=list(m.goodput_runs) if m else [],
                max_rate=m.max_rate if m else None,
                request_throughput=m.request_throughput if m else None,
                output_throughput=m.output_throughput if m else None,
                slo_values=vals,
                meets=r.meets_slo,
                vs_default=r.score / base if base and m else None,
                on_front=r.number in front,
                best=best is not None and r.number == best.number,
                reason=r.reason,
                log=r.log_file,
                bench=r.bench_file,
            )
        )
    return out


def start_table(records: list[TrialRecord]) -> tuple[list[str], list[TrialRecord]]:
    """The start-phase columns any trial has (in start-up order) and the trials that started."""
    from llmdeck.tune.startcost import SEGMENTS

    started = [r for r in records if r.startup_s is not None]
    cols = [name for _, name in SEGMENTS if any(name in r.start_phases for r in started)]
    return cols, started


def goodput_chart(rs: list[Row]) -> str:
    """The median goodput per trial as a bar; with --repeat, each run a dot and the min..max a whisker,
    so configs whose runs do not overlap show apart."""
    with charts.figure(5.6, 2.8) as (fig, axes):
        ax = axes[0][0]
        xs = [r.number for r in rs]
        colors = [charts.COLORS[2] if r.meets else "#adb5bd" for r in rs]
        heights = [r.goodput or 0.0 for r in rs]
        ax.bar(xs, heights, color=colors)
        pairs = zip(xs, heights, rs, strict=True)
        multi = [(x, h, r.goodput_runs) for x, h, r in pairs if len(r.goodput_runs) > 1]
        for x, h, runs in multi:
            ax.errorbar([x], [h], yerr=[[h - min(runs)], [max(runs) - h]], color="#343a40", capsize=4, lw=1)
            ax.plot([x] * len(runs), runs, ls="none", marker="o", ms=3, color="#343a40")
        runs_note = "; dots: each run, whisker: min..max" if multi else ""
        ax.set_xlabel(f"trial (green: meets every SLO{runs_note})")
        ax.set_ylabel("goodput, requests/s")
        ax.set_xticks(xs)
        return charts.to_svg(fig, "goodput per trial")


def pareto_chart(rs: list[Row], metric_label: str, first_index: int = 0) -> str:
    pts = [
        (float(r.slo_values[first_index]), r.output_throughput or 0.0, r)
        for r in rs
        if r.status == "ok" and r.slo_values[first_index] != "-"
    ]
    with charts.figure(4.8, 3.2) as (fig, axes):
        ax = axes[0][0]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="none", marker="o", ms=5, color="#adb5bd")
        front = sorted((p for p in pts if p[2].on_front), key=lambda p: p[0])
        ax.plot(
            [p[0] for p in front],
            [p[1] for p in front],
            marker="o",
            ms=5,
            color=charts.COLORS[0],
            label="Pareto front",
        )
        for x, y, r in pts:
            ax.annotate(str(r.number), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if r.best:
                ax.plot([x], [y], marker="*", ms=14, color=charts.COLORS[1], ls="none", label="chosen")
        ax.margins(x=0.18, y=0.15)
        ax.set_xlabel(f"{metric_label}, ms (lower is better)")
        ax.set_ylabel("output tok/s")
        ax.legend(loc="best")
        return charts.to_svg(fig, "throughput against the SLO metric")


def _env() -> Any:
    import jinja2

    from llmdeck.bench.html.page import visible_controls

    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [
                jinja2.PackageLoader("llmdeck.tune", "templates"),
                jinja2.PackageLoader("llmdeck.bench.html", "templates"),
            ]
        ),
        autoescape=True,
        finalize=visible_controls,  # a trials file is data: its flags' control characters shown
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def shown(record: TrialRecord) -> TrialRecord:
    """A trial as shown (tables, pages): secret flag values and variables redacted. llmdeck keeps
    secrets out of trials.jsonl, but a file edited or from elsewhere may hold them."""
    from llmdeck.util.redact import redact_argv, redact_env

    return record.model_copy(update={"args": redact_argv(record.args), "env": redact_env(record.env)})


def render_tune_html(
    header: TrialsHeader,
    records: list[TrialRecord],
    best: TrialRecord | None,
    noise: NoiseDecision | None = None,
) -> str:
    charts.require_matplotlib()
    records, best = [shown(r) for r in records], shown(best) if best is not None else None
    rs = rows(header, records, best)
    measured = [r for r in rs if r.status == "ok"]
    figs: list[Chart] = []
    if measured:
        figs.append(Chart(title="Goodput per trial", svg=goodput_chart(measured), points=len(measured)))
        first = header.request.slo[0]
        figs.append(
            Chart(
                title=f"Output throughput against {first.label()} (Pareto)",
                svg=pareto_chart(rs, first.label()),
                points=len(measured),
            )
        )
    effects: list[Effect] = what_mattered(records, [d.name for d in header.space], header.defaults)
    start_cols, started = start_table(records)
    css = (Path(charts.__file__).parent / "templates" / "report.css").read_text(encoding="utf-8")
    made = f"llmdeck {__version__}, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    return str(
        _env()
        .get_template("tune.html.jinja")
        .render(
            header=header,
            rows=rs,
            best=best,
            best_runs=_best_runs(records, best),
            noise=noise,
            charts=figs,
            effects=effects,
            start_cols=start_cols,
            started=started,
            css=css,
            made=made,
        )
    )


def _best_runs(records: list[TrialRecord], best: TrialRecord | None) -> list[float]:
    from llmdeck.tune.outputs import config_runs

    return [r.score for r in config_runs(records).get(best.number, [])] if best else []


def write_tune_report(
    header: TrialsHeader,
    records: list[TrialRecord],
    best: TrialRecord | None,
    path: Path,
    noise: NoiseDecision | None = None,
) -> None:
    from llmdeck.bench.html.page import write_html

    write_html(path, render_tune_html(header, records, best, noise))
