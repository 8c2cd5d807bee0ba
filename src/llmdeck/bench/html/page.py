"""Building and writing the page: views from result files, charts into them, the jinja2 template
(autoescaped: every string from a result is data), an atomic write."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from llmdeck import __version__
from llmdeck.bench.html import charts
from llmdeck.bench.html.diff import Comparison, compare_results, pooled_runs
from llmdeck.bench.html.series import cdf, per_request_ms
from llmdeck.bench.html.sweep import SweepView, sweep_view
from llmdeck.bench.html.view import Chart, RunView, ScenarioView, run_view
from llmdeck.bench.result_schema import BenchResult
from llmdeck.errors import UsageError
from llmdeck.util.redact import redact_text
from llmdeck.util.safetext import safe_text


def _scenario_charts(sv: ScenarioView) -> None:
    for d in sv.dists:
        if not d.cdf.n:
            continue
        marks = {"mean": d.mean.value, "p50": d.p50.value, "p90": d.p90.value, "p99": d.p99.value}
        sv.charts.append(
            Chart(
                title=f"{d.name} distribution",
                svg=charts.cdf_chart(d.name, d.cdf, marks),
                points=len(d.cdf.x),
                caption=False,
            )
        )
    ttft, tps = sv.ttft_series, sv.tps_series
    svg, panels = charts.timeline_chart((ttft.x, ttft.y), (tps.x, tps.y), sv.timeline, ttft.binned)
    if panels:
        tl = sv.timeline
        points = len(ttft.x) + len(tps.x) + (len(tl.server_t) + len(tl.host_t) if tl else 0)
        notes = [n for n in (ttft.note and f"TTFT: {ttft.note}", tps.note and f"tok/s: {tps.note}") if n]
        sv.charts.append(
            Chart(title="Over the run", svg=svg, points=points, note="; ".join(notes), caption=False)
        )


def _sweep_charts(sw: SweepView) -> None:
    xs = [p.load for p in sw.points]
    ttft = {
        "mean TTFT": [p.mean_ttft.value for p in sw.points],
        "P99 TTFT": [p.p99_ttft.value for p in sw.points],
    }
    tpot = {"mean TPOT": [p.mean_tpot.value for p in sw.points]}
    for unit, series in (("TTFT", ttft), ("TPOT", tpot)):
        svg = charts.latency_load_chart(sw.load_label, xs, series, unit)
        sw.charts.append(Chart(title=f"{unit} against load", svg=svg, points=len(xs)))
    pts = [
        (p.per_user_tps, p.output_throughput.value or 0.0, p.setting, p.on_frontier, p.knee)
        for p in sw.points
        if p.per_user_tps is not None
    ]
    if pts:
        sw.charts.append(
            Chart(
                title="Throughput against interactivity (Pareto)",
                svg=charts.pareto_chart(pts),
                points=len(pts),
            )
        )
    goodput = [p.goodput.value if p.goodput else None for p in sw.points]
    if any(g is not None for g in goodput):
        tput = [p.request_throughput.value or 0.0 for p in sw.points]
        sw.charts.append(
            Chart(
                title="Goodput",
                svg=charts.goodput_chart(sw.load_label, xs, goodput, tput),
                points=len(xs),
                note=sw.goodput_note,
            )
        )


def build_run(result: BenchResult, file: str) -> tuple[RunView, SweepView | None]:
    view = run_view(result, file)
    for sv in view.scenarios:
        _scenario_charts(sv)
    sw = sweep_view(result)
    if sw is not None:
        _sweep_charts(sw)
    return view, sw


def build_comparison(results: list[BenchResult], files: list[str]) -> tuple[Comparison, list[RunView]]:
    cmp = compare_results(results, files)
    for diff in cmp.scenarios:
        runs = pooled_runs(results, diff)
        for key, name in (("ttft", "TTFT"), ("tpot", "TPOT")):
            curves = []
            for k, rs in zip(diff.files, runs, strict=True):
                values = [v for sr in rs for v in per_request_ms(sr.requests)[key]]
                curves.append((cmp.letters[k], cdf(values)))
            n = sum(c.n for _, c in curves)
            if n:
                diff.charts.append(
                    Chart(
                        title=f"{name} per file",
                        svg=charts.overlay_cdf_chart(name, curves),
                        points=n,
                        caption=False,
                    )
                )
    views = [run_view(r, f, k) for k, (r, f) in enumerate(zip(results, files, strict=True))]
    return cmp, views


def visible_controls(value: object) -> object:
    """Every value the page shows, with control characters (ESC, BEL, CR ...) and bidi overrides from a
    result file written as visible ``\\x1b`` / ``\\u202e`` (HTML-escaping keeps tags out, not them), and
    secrets hidden as ``report --json`` hides them (a URL's password, ``--api-key X`` in the server's
    flags, a key in an agent's transcript): a file edited by hand or written by an older llmdeck may
    hold them. Every page (bench, eval, tune) renders its data through this one filter."""
    import markupsafe

    if isinstance(value, markupsafe.Markup):  # already-escaped HTML (an SVG chart, a macro's output)
        return markupsafe.Markup(safe_text(str(value)))
    if isinstance(value, str):
        return safe_text(redact_text(value))
    return value


def _env() -> object:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("llmdeck.bench.html", "templates"),
        autoescape=True,
        finalize=visible_controls,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def render_html(results: list[BenchResult], files: list[str]) -> str:
    """The page: one result's run page, or a comparison page of several."""
    import jinja2

    env = _env()
    assert isinstance(env, jinja2.Environment)
    css = (Path(__file__).parent / "templates" / "report.css").read_text(encoding="utf-8")
    made = f"llmdeck {__version__}, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    if len(results) == 1:
        view, sw = build_run(results[0], files[0])
        return env.get_template("run.html.jinja").render(view=view, sweep=sw, css=css, made=made)
    cmp, views = build_comparison(results, files)
    return env.get_template("compare.html.jinja").render(cmp=cmp, views=views, css=css, made=made)


def write_html(path: Path, html: str) -> None:
    """Write the page atomically; an unwritable path is a usage error (exit 2) saying so."""
    from llmdeck.util.atomic import atomic_write_text

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--html {p} is a folder.", hint="Give a file name, e.g. --html report.html.")
    refuse_foreign_page(p)
    try:
        atomic_write_text(p, html)
        p.chmod(0o644)  # a page to share, unlike the temp file's 0600
    except OSError as exc:
        raise UsageError(
            f"Cannot write the HTML report to {p}: {exc.strerror or exc}.",
            hint="Pick a path in a folder you can write to.",
        ) from exc


def refuse_foreign_page(path: Path) -> None:
    """--html replaces only a page llmdeck wrote: never a result file given as input, nor the user's."""
    from llmdeck.util.owned import is_report_page, refuse_foreign_file

    refuse_foreign_file(path, "report page", is_report_page)


def check_html_path(path: Path) -> None:
    """Before a run: refuse an --html path that cannot be written, or a page that cannot be drawn
    (matplotlib missing), with exit 2 — not after an hour of bench."""
    import os

    charts.require_matplotlib()

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--html {p} is a folder.", hint="Give a file name, e.g. --html report.html.")
    refuse_foreign_page(p)
    parent = p.parent if str(p.parent) else Path(".")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(
            f"Cannot write the HTML report to {p}: {probe} is a file, not a folder.",
            hint="Pick a path in a folder you can write to.",
        )
    if not os.access(probe, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(
            f"Cannot write the HTML report to {p}: {probe} is not writable.",
            hint="Pick a path in a folder you can write to.",
        )


def write_report(results: list[BenchResult], files: list[str], out: Path) -> int:
    """Render ``results`` (one: a run page; several: a comparison) to ``out``; returns its size in bytes."""
    html = render_html(results, files)
    write_html(out, html)
    return len(html.encode("utf-8"))
