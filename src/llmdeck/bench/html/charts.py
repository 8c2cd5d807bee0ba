"""The page's charts: matplotlib figures saved as SVG and inlined (no script, no network).

matplotlib because it is already llmdeck's plotting extra (``--plot``), draws a chart of a few
hundred points in ~20 ms, and its SVG is static markup (text kept as <text>): a page of a dozen
charts is a few hundred kB and opens without running anything. plotly's offline bundle would add
~3.5 MB of JavaScript to every page, Vega-Lite a runtime to render in the browser. Strings from
result files never go into a chart (legends use letters and numbers); the page's HTML carries them,
escaped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llmdeck.bench.html.series import Cdf, thin
from llmdeck.bench.result_schema import Timeline
from llmdeck.bench.tables import fmt_ms

COLORS = ["#1f6feb", "#d9480f", "#2f9e44", "#ae3ec9", "#f59f00", "#0c8599", "#e64980", "#5c940d"]
MARKS = (("mean", "--", "#555"), ("p50", ":", "#1f6feb"), ("p90", ":", "#f59f00"), ("p99", ":", "#d9480f"))
_RC = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "svg.hashsalt": "llmdeck",
}
_counter = [0]
_OUTSIDE: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}


def require_matplotlib() -> None:
    """MissingDependencyError (exit 2, with the pip line) when matplotlib is not installed."""
    _mpl()


def _mpl() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        from llmdeck.errors import MissingDependencyError

        raise MissingDependencyError(
            "The HTML report needs matplotlib, which is not installed.",
            hint="pip install 'llmdeck[plot]' (or matplotlib).",
        ) from exc
    return matplotlib


@contextmanager
def figure(
    width: float, height: float, rows: int = 1, cols: int = 1, right: float = 0.12, **kw: Any
) -> Iterator[tuple[Any, Any]]:
    """A Figure (no pyplot: nothing global, no GUI) and its axes, with the page's style."""
    mpl = _mpl()
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    _counter[0] += 1
    with mpl.rc_context({**_RC, "svg.hashsalt": f"llmdeck-{_counter[0]}"}):
        fig = Figure(figsize=(width, height))
        # fixed margins in inches (constrained layout would double the drawing time)
        fig.subplots_adjust(
            left=0.62 / width,
            right=1 - right / width,
            bottom=0.5 / height,
            top=1 - 0.28 / height,
            hspace=0.12 * rows if kw.get("sharex") else 0.4,
            wspace=0.32,
        )
        axes = fig.subplots(rows, cols, squeeze=False, **kw)
        for ax in axes.flat:  # fewer ticks: each one costs drawing time and bytes
            ax.xaxis.set_major_locator(MaxNLocator(6))
            ax.yaxis.set_major_locator(MaxNLocator(4))
        yield fig, axes


def to_svg(fig: Any, label: str) -> str:
    """The figure as an inline <svg>: no XML prolog, sized by CSS through its viewBox."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="chart"', svg, count=1)
    svg = svg.replace("<svg", f'<svg role="img" aria-label="{label}"', 1)
    return re.sub(r"<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)


def cdf_chart(name: str, c: Cdf, marks: dict[str, float | None]) -> str:
    """One metric's CDF with its mean and P50/P90/P99 as vertical lines."""
    with figure(3.6, 2.4) as (fig, axes):
        ax = axes[0][0]
        ax.plot(c.x, c.y, color="#222", lw=1.4, drawstyle="steps-post")
        for key, style, color in MARKS:
            v = marks.get(key)
            if v is not None:
                name_ = "mean" if key == "mean" else key.upper()
                ax.axvline(v, ls=style, color=color, lw=1.1, label=f"{name_} {fmt_ms(v)}")
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("fraction of requests" if name != "ITL" else "fraction of tokens")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="best")
        ax.set_title(f"{name}: CDF of {c.n}")
        return to_svg(fig, f"{name} distribution")


def _panels(
    ttft: tuple[list[float], list[float]], tps: tuple[list[float], list[float]], tl: Timeline | None
) -> list[str]:
    names = []
    if ttft[0]:
        names.append("ttft")
    if tps[0]:
        names.append("tps")
    if tl is not None and tl.server_t:
        names += ["queue", "cache"]
        if any(p for p in tl.preemptions if p):
            names.append("preempt")
    if tl is not None and tl.host_t:
        names.append("memory")
    return names


def _draw_panel(ax: Any, name: str, ttft: Any, tps: Any, tl: Timeline | None, binned: bool) -> None:
    if name == "ttft":
        if binned:
            ax.plot(*ttft, color=COLORS[0], lw=1.2)
        else:
            ax.plot(*ttft, ls="none", marker="o", ms=2.5, color=COLORS[0])
        ax.set_ylabel("TTFT (ms)")
    elif name == "tps":
        ax.plot(*tps, color=COLORS[2], lw=1.2, drawstyle="steps-mid")
        ax.set_ylabel("output tok/s")
    elif tl is not None and name == "queue":
        ax.plot(
            *thin(tl.server_t, tl.running), color=COLORS[0], lw=1.2, drawstyle="steps-post", label="running"
        )
        ax.plot(
            *thin(tl.server_t, tl.waiting), color=COLORS[1], lw=1.2, drawstyle="steps-post", label="waiting"
        )
        ax.set_ylabel("requests")
        ax.legend(**_OUTSIDE)
    elif tl is not None and name == "cache":
        ax.plot(*thin(tl.server_t, tl.kv_usage_pct), color=COLORS[3], lw=1.2, label="KV cache usage")
        hits = thin(tl.server_t, tl.prefix_hit_rate_pct)
        ax.plot(*hits, color=COLORS[5], lw=1.0, marker=".", ms=3, label="prefix-cache hits")
        ax.set_ylabel("%")
        ax.set_ylim(-2, 102)
        ax.legend(**_OUTSIDE)
    elif tl is not None and name == "preempt":
        ax.plot(*thin(tl.server_t, tl.preemptions), color=COLORS[6], lw=1.2, drawstyle="steps-post")
        ax.set_ylabel("preemptions")
    elif tl is not None and name == "memory":
        _memory(ax, tl)


def _memory(ax: Any, tl: Timeline) -> None:
    t = tl.host_t
    ax.plot(*thin(t, tl.mem_available_gib, "min"), color=COLORS[0], lw=1.2, label="MemAvailable")
    ax.plot(*thin(t, tl.page_cache_gib), color=COLORS[4], lw=1.0, label="page cache")
    ax.plot(*thin(t, tl.swap_used_gib), color=COLORS[1], lw=1.0, label="swap used")
    for i, g in enumerate(tl.gpu_used_gib):
        ax.plot(*thin(t, g), color=COLORS[(3 + i) % len(COLORS)], lw=1.0, label=f"GPU{i} used")
    ax.set_ylabel("GiB")
    ax.set_ylim(bottom=0)
    ax.legend(**_OUTSIDE)


def _f(values: list[float | None]) -> list[float]:
    return [float("nan") if v is None else v for v in values]


def timeline_chart(
    ttft: tuple[list[float], list[float]],
    tps: tuple[list[float], list[float]],
    tl: Timeline | None,
    binned: bool,
) -> tuple[str, int]:
    """TTFT and tokens/s over the run, the server's queue and caches, the host's memory: stacked panels
    on one time axis (seconds from the scenario's start). Returns the SVG and its panel count."""
    names = _panels(ttft, tps, tl)
    if not names:
        return "", 0
    # legends right of the panels (never over the data): 1.4 in kept free on the right
    with figure(7.2, 1.35 * len(names) + 0.5, rows=len(names), right=1.4, sharex=True) as (fig, axes):
        for ax, name in zip((a[0] for a in axes), names, strict=True):
            _draw_panel(ax, name, ttft, tps, tl, binned)
        axes[-1][0].set_xlabel("seconds from the scenario's start")
        return to_svg(fig, "the run over time"), len(names)


def overlay_cdf_chart(name: str, curves: list[tuple[str, Cdf]]) -> str:
    """One metric's CDF for several files (legend: the files' letters)."""
    with figure(3.6, 2.4) as (fig, axes):
        ax = axes[0][0]
        for k, (letter, c) in enumerate(curves):
            if c.n:
                ax.plot(c.x, c.y, color=COLORS[k % len(COLORS)], lw=1.4, drawstyle="steps-post", label=letter)
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="best")
        ax.set_title(f"{name}: CDF per file")
        return to_svg(fig, f"{name} per file")


def latency_load_chart(
    load_label: str, xs: list[float], series: dict[str, list[float | None]], unit: str
) -> str:
    """Latency against load: the given series (e.g. mean and P99 TTFT) at each sweep point."""
    with figure(3.8, 2.6) as (fig, axes):
        ax = axes[0][0]
        for k, (name, ys) in enumerate(series.items()):
            ax.plot(xs, _f(ys), marker="o", ms=4, color=COLORS[k if unit == "TTFT" else 2 + k], label=name)
        ax.set_ylabel(f"{unit} (ms)")
        ax.set_xlabel(load_label)
        ax.set_ylim(bottom=0)
        ax.margins(x=0.08)
        ax.legend(loc="upper left")
        return to_svg(fig, f"{unit} against load")


def pareto_chart(points: list[tuple[float, float, str, bool, bool]]) -> str:
    """Output tok/s against tok/s per user, the frontier joined, the knee starred.

    ``points``: (per-user tok/s, output tok/s, setting, on frontier, knee)."""
    with figure(4.4, 3.2) as (fig, axes):
        ax = axes[0][0]
        ax.plot([p[0] for p in points], [p[1] for p in points], ls="none", marker="o", ms=5, color="#adb5bd")
        front = sorted((p for p in points if p[3]), key=lambda p: p[0])
        ax.plot(
            [p[0] for p in front],
            [p[1] for p in front],
            marker="o",
            ms=5,
            color=COLORS[0],
            label="Pareto frontier",
        )
        for x, y, setting, _, knee in points:
            ax.annotate(setting, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if knee:
                ax.plot([x], [y], marker="*", ms=16, color=COLORS[1], ls="none", label="knee")
        ax.margins(x=0.18, y=0.12)
        ax.set_xlabel("tok/s per user (1000 / mean TPOT)")
        ax.set_ylabel("output tok/s")
        ax.legend(loc="lower left")
        return to_svg(fig, "throughput against interactivity")


def goodput_chart(
    load_label: str, xs: list[float], goodput: list[float | None], throughput: list[float]
) -> str:
    """Goodput (requests/s within the SLOs) next to the request throughput, per sweep point."""
    with figure(4.4, 2.6) as (fig, axes):
        ax = axes[0][0]
        ax.plot(xs, throughput, marker="o", ms=4, color="#868e96", label="requests/s")
        ax.plot(xs, _f(goodput), marker="o", ms=4, color=COLORS[2], label="goodput (within SLOs)")
        ax.set_xlabel(load_label)
        ax.set_ylabel("requests/s")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left")
        return to_svg(fig, "goodput against load")
