"""The HTML report (`llmdeck report --html`), rendered from committed real results: bench runs on the
CPU engine (tiny Qwen3, evidence/report/cpu_*.sh) — a concurrency sweep, an overload whose waiting
queue builds up, the same repeated scenario on two server configurations, and the seeds' suite."""

from __future__ import annotations

import functools
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape

from cli_helpers import run_cli
from llmdeck.bench.html.diff import Side, compare_results, judge
from llmdeck.bench.html.page import build_run, render_html
from llmdeck.bench.html.sweep import SweepPoint, mark_frontier, sweep_view
from llmdeck.bench.html.view import FORMATS, json_value, num, run_view
from llmdeck.bench.result_file import load_result
from llmdeck.bench.result_schema import BenchResult
from repo_paths import ROOT

RESULTS = ROOT / "evidence" / "report" / "results"
SWEEP, OVERLOAD = RESULTS / "sweep.json", RESULTS / "overload.json"
CMP_A, CMP_B = RESULTS / "cmp-seqs16.json", RESULTS / "cmp-seqs2.json"
SEEDS = RESULTS / "seeds.json"  # `bench --suite seeds` (max_model_len 4096: 4 of 8 skipped)
# the same suite on an H200 (vLLM 0.22.0, Qwen3-Coder-30B-A3B shape, 131,072 tokens): 6 scenarios done,
# the 64K and 128K ones cut by the device call's time limit (interrupted), evidence/device/serving-layer
H200_SEEDS = ROOT / "benchmarks" / "results" / "bench_h200-seeds.json"


class _Page(HTMLParser):
    """Numbers (data-src), figures (data-chart) with their SVGs, and every src/href of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.nums: list[dict[str, str]] = []
        self.figures: list[dict[str, str | int]] = []
        self.links: list[str] = []
        self.scripts = 0
        self._num: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.links += [a[k] for k in ("src", "href") if k in a]
        if tag == "script":
            self.scripts += 1
        if tag == "figure":
            self.figures.append({"chart": a["data-chart"], "points": int(a["data-points"]), "svgs": 0})
        if tag == "svg" and self.figures:
            self.figures[-1]["svgs"] = int(self.figures[-1]["svgs"]) + 1
        if tag == "span" and "data-src" in a:
            self._num = {**a, "text": ""}

    def handle_data(self, data: str) -> None:
        if self._num is not None:
            self._num["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._num is not None:
            self.nums.append(self._num)
            self._num = None


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


@functools.cache
def _rendered(files: tuple[Path, ...]) -> str:
    return render_html([load_result(f) for f in files], [str(f) for f in files])


def _render(files: list[Path]) -> str:
    """The page of committed result files (rendered once per test session: ~0.3 s a scenario)."""
    return _rendered(tuple(files))


def test_view_model_of_a_real_sweep() -> None:
    """Per scenario: the four distributions with the result's own mean/P50/P90/P99, CDFs no longer
    than 300 points, the time series, and the monitor's timeline."""
    res = load_result(SWEEP)
    view = run_view(res, "sweep.json")
    assert len(view.scenarios) == 5
    for sv, sr in zip(view.scenarios, res.scenarios, strict=True):
        assert sr.metrics and sr.metrics.ttft_ms and sr.metrics.itl_ms
        names = [d.name for d in sv.dists]
        assert names == ["TTFT", "TPOT", "ITL", "E2EL"]
        ttft = sv.dists[0]
        assert ttft.mean.value == sr.metrics.ttft_ms.mean and ttft.p99.value == sr.metrics.ttft_ms.p(99)
        assert ttft.cdf.n == sr.metrics.ttft_ms.n == len(ttft.cdf.x)
        itl = sv.dists[2]
        assert itl.cdf.n == sr.metrics.itl_ms.n > 300 and len(itl.cdf.x) == 300
        # the CDF's ends are the measured extremes
        itl_ms = sorted(g * 1000 for r in sr.requests for g in r.itl)
        assert itl.cdf.x[0] == pytest.approx(itl_ms[0]) and itl.cdf.x[-1] == pytest.approx(itl_ms[-1])
        assert len(sv.ttft_series.x) == sr.metrics.completed and sv.tps_series.x
        assert sv.timeline is not None and sv.timeline.server_t and sv.timeline.host_t
        assert not sv.missing
    assert view.env["Server version"] == "0.32.0" and "--max-num-seqs 16" in view.env["Server flags"]


def test_seeds_suite_page_is_the_seeds_table_with_plots_one_click_away() -> None:
    res = load_result(SEEDS)
    html = _render([SEEDS])
    page = _parse(html)
    anchors = [u for u in page.links if u.startswith("#s0-")]
    assert len(res.scenarios) == 8 and len(set(anchors)) == 8
    for k, sr in enumerate(res.scenarios):
        assert f'id="s0-{k}"' in html  # each row's link lands on its scenario's section
        if sr.status == "skipped":
            assert sr.skip_reason and str(escape(sr.skip_reason)) in html  # ' is &#39;
    failed = [sr for sr in res.scenarios if sr.verdict and not sr.verdict.passed]
    assert failed and all(sr.verdict and str(escape(sr.verdict.label)) in html for sr in failed)


def test_h200_seeds_page_shows_the_gpu_run_and_what_was_cut() -> None:
    res = load_result(H200_SEEDS)
    assert res.status == "interrupted" and res.target.server_version == "0.22.0"
    done = [sr for sr in res.scenarios if sr.status == "done"]
    assert len(done) == 6 and all(sr.metrics.completed == len(sr.requests) for sr in done)
    html = _render([H200_SEEDS])
    page = _parse(html)
    assert page.figures and all(int(f["points"]) > 0 for f in page.figures)
    assert "H200" in html and "interrupted" in html.lower()


def test_overload_page_shows_the_waiting_queue_and_the_failed_slo() -> None:
    res = load_result(OVERLOAD)
    sr = res.scenarios[0]
    assert sr.timeline is not None and max(w or 0 for w in sr.timeline.waiting) > 10  # queue built up
    view, sweep = build_run(res, "overload.json")
    assert sweep is None
    sv = view.scenarios[0]
    assert sv.verdict_passed is False and "P99 TTFT" in sv.verdict
    assert [c.passed for c in sv.checks if c.rule == "ttft_p99"] == [False]
    over = next(c for c in sv.charts if c.title == "Over the run")
    assert over.points > 100 and over.svg.count('<g id="axes_') == 5  # ttft, tok/s, queue, caches, memory
    html = _render([OVERLOAD])
    assert "FAILED" in html and "not for multi-user" in html


def test_numbers_in_the_page_equal_report_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every number the page marks with its JSON path is the value `report --json` prints there, and
    its text is that value in the page's format (the summary table: the terminal's)."""
    for f in (SWEEP, OVERLOAD, CMP_A, SEEDS, H200_SEEDS):
        if f == SWEEP:  # through the CLI: --json and --html at once
            out_html = tmp_path / f"{f.stem}.html"
            code, out, _ = run_cli(["report", str(f), "--json", "--html", str(out_html)], capsys)
            html = out_html.read_text(encoding="utf-8")
        else:
            code, out, _ = run_cli(["report", str(f), "--json"], capsys)
            html = _render([f])
        assert code == 0
        data = json.loads(out)
        page = _parse(html)
        assert len(page.nums) > 30
        for n in page.nums:
            file_no, path = n["data-src"].split(":", 1)
            assert file_no == "0"
            value = json_value(data, path)
            assert float(n["data-value"]) == value, n
            assert n["text"] == FORMATS[n["data-fmt"]](value), n
        # the terminal table's cells for the first scenario are on the page as they are printed
        code, table, _ = run_cli(["report", str(f)], capsys)
        first = [
            n["text"] for n in page.nums if n["data-src"].startswith("0:scenarios.0.metrics.ttft_ms.mean")
        ]
        assert first and first[0] in table


def test_page_is_self_contained_with_an_svg_per_chart() -> None:
    for files in ([SWEEP], [OVERLOAD], [CMP_A, CMP_B]):
        html = _render(files)
        page = _parse(html)
        assert page.scripts == 0 and "<script" not in html.lower()
        assert not [u for u in page.links if re.match(r"^(https?:)?//", u)], page.links
        assert all(u.startswith("#") for u in page.links)
        assert not re.search(r"url\((?!#)|@import", html)  # SVG's clip-path="url(#id)" only
        assert not re.search(r"https?://(?!www\.w3\.org/|127\.0\.0\.1:)", html)  # SVG namespaces, the target
        assert page.figures and all(f["svgs"] == 1 and int(f["points"]) > 0 for f in page.figures)
        assert '<meta name="viewport"' in html and "Content-Security-Policy" in html
    sweep_page = _parse(_render([SWEEP]))
    # 5 scenarios x (4 CDFs + the run over time) + TTFT and TPOT against load, Pareto and goodput
    assert len(sweep_page.figures) == 5 * 5 + 4


def test_hostile_strings_are_escaped() -> None:
    res = load_result(OVERLOAD)
    evil = "<script>alert(1)</script>"
    res.target.model = evil
    res.target.server_version = '"><img src=x onerror=alert(2)>'
    res.target.server_args = ["vllm", "serve", "--x", "$\\frac{1}{0}$ </td><script>alert(3)</script>"]
    res.scenarios[0].spec.description = "<b onmouseover=alert(4)>hi</b>"
    res.scenarios[0].spec.name = "$x^$ & <i>"
    res.host.gpus = ["<svg onload=alert(5)>"]
    for html in (
        render_html([res], ["<evil>.json"]),
        render_html([res, load_result(OVERLOAD)], ["a.json", "b.json"]),
    ):
        assert "<script>alert" not in html and "<img" not in html and "<b onmouseover" not in html
        assert "<svg onload" not in html and "<evil>" not in html and "<i>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&lt;svg onload=alert(5)&gt;" in html


def test_sweep_pareto_frontier_and_knee_from_a_real_sweep() -> None:
    sw = sweep_view(load_result(SWEEP))
    assert sw is not None and sw.axis == "max concurrency" and sw.load_label == "max concurrency"
    assert [p.setting for p in sw.points] == ["c1", "c2", "c4", "c8", "c16"]
    assert [p.load for p in sw.points] == [1, 2, 4, 8, 16]
    frontier = [p for p in sw.points if p.on_frontier]
    # frontier: no other point has both more tok/s per user and more output tok/s
    for p in sw.points:
        dominated = any(
            (q.per_user_tps or 0) > (p.per_user_tps or 0)
            and (q.output_throughput.value or 0) > (p.output_throughput.value or 0)
            for q in sw.points
        )
        assert p.on_frontier is not dominated
    knees = [p for p in sw.points if p.knee]
    assert len(frontier) >= 3 and len(knees) == 1 and knees[0].on_frontier
    assert knees[0] not in (frontier[0], frontier[-1]) and knees[0].setting in sw.knee_note
    # the run had --goodput ttft:100 tpot:15: vLLM's goodput, as recorded
    assert "ttft ≤ 100 ms" in sw.goodput_note and all(p.goodput is not None for p in sw.points)


def _pt(x: float, y: float, setting: str) -> SweepPoint:
    n = num(y, "rate")
    return SweepPoint(
        index=0,
        label=setting,
        setting=setting,
        load=0,
        request_throughput=n,
        output_throughput=n,
        mean_ttft=n,
        p99_ttft=n,
        mean_tpot=num(1000 / x, "ms2"),
        per_user_tps=x,
    )


def test_knee_is_where_throughput_stops_paying_for_interactivity() -> None:
    """Throughput doubles from c1 to c4 for little interactivity, then barely grows: knee at c4.
    c8b is dominated by c8 (less of both) and is off the frontier."""
    pts = [
        _pt(100, 100, "c1"),
        _pt(95, 190, "c2"),
        _pt(90, 360, "c4"),
        _pt(50, 390, "c8"),
        _pt(45, 380, "c8b"),
        _pt(20, 400, "c16"),
    ]
    note = mark_frontier(pts)
    assert [p.setting for p in pts if p.on_frontier] == ["c1", "c2", "c4", "c8", "c16"]
    assert [p.setting for p in pts if p.knee] == ["c4"] and "knee at c4" in note
    two = [_pt(100, 100, "a"), _pt(50, 200, "b")]
    assert "no knee" in mark_frontier(two) and not any(p.knee for p in two)


def test_comparison_of_two_real_results_deltas_ranges_and_env_diff() -> None:
    a, b = load_result(CMP_A), load_result(CMP_B)
    cmp = compare_results([a, b], ["a.json", "b.json"])
    env = {r.key: r for r in cmp.env}
    assert env["Server flags"].differs and "--max-num-seqs 16" in env["Server flags"].values[0]
    assert "--max-num-seqs 2" in env["Server flags"].values[1]
    assert not env["Server version"].differs and not env["Model"].differs and not env["GPU"].differs
    assert len(cmp.scenarios) == 1
    rows = {r.metric: r for r in cmp.scenarios[0].rows}
    ttft = rows["Mean TTFT"]
    sa, sb = ttft.sides
    assert sa and sb and sa.runs == sb.runs == 3
    assert sa.median.value == a.repeats[0].metrics["mean_ttft_ms"].median
    assert sb.min and sb.min.value == b.repeats[0].metrics["mean_ttft_ms"].min
    d = ((sb.median.value or 0) - (sa.median.value or 0)) / (sa.median.value or 1) * 100
    assert ttft.deltas == [f"{d:+.1f}%"]
    # judged only when the min-max ranges do not overlap
    for row in rows.values():
        s0, s1 = row.sides
        assert s0 and s1 and s0.min and s0.max and s1.min and s1.max
        overlap = (s1.min.value or 0) <= (s0.max.value or 0) and (s1.max.value or 0) >= (s0.min.value or 0)
        assert (row.judged[0] == "within noise") is overlap
    html = _render([CMP_A, CMP_B])
    assert 'class="differs"' in html and "TTFT per file" in html


@pytest.mark.parametrize(
    "files",
    [[CMP_A, CMP_B], [ROOT / "evidence" / "eval" / "h200" / n for n in ("eval-fp8.json", "eval-bf16.json")]],
)
def test_a_comparison_page_with_json_prints_the_results_compared(
    files: list[Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`report A B --html cmp.html --json` had printed nothing on stdout (exit 0): --json now gives the
    results compared, in order, as one JSON document."""
    code, out, err = run_cli(
        ["report", *map(str, files), "--html", str(tmp_path / "cmp.html"), "--json"], capsys
    )
    assert code == 0, err
    assert [r["created_at"] for r in json.loads(out)] == [
        json.loads(f.read_text())["created_at"] for f in files
    ]


def test_a_difference_inside_the_range_is_not_a_win() -> None:
    def side(med: float, lo: float, hi: float, runs: int = 3) -> Side:
        return Side(file_no=0, median=num(med, "ms"), min=num(lo, "ms"), max=num(hi, "ms"), runs=runs)

    base = side(100, 90, 130)
    assert judge(base, side(80, 75, 95), higher_better=False) == "within noise"  # -20%, ranges overlap
    assert judge(base, side(60, 55, 70), higher_better=False) == "better"
    assert judge(base, side(160, 140, 170), higher_better=False) == "worse"
    assert judge(base, side(160, 140, 170), higher_better=True) == "better"
    one = Side(file_no=1, median=num(50, "ms"), runs=1)
    assert judge(base, one, higher_better=False) == "1 run: not judged"


def test_a_result_without_requests_or_timeline_says_what_is_missing() -> None:
    res = load_result(OVERLOAD)
    for sr in res.scenarios:
        sr.requests = []
        sr.timeline = None
    view, _ = build_run(BenchResult.model_validate(res.model_dump()), "old.json")
    sv = view.scenarios[0]
    assert sv.dists and all(d.cdf.n == 0 for d in sv.dists)
    assert any("no per-request timings" in m for m in sv.missing)
    assert any("no timeline samples" in m for m in sv.missing)
    html = render_html([res], ["old.json"])
    assert "Not in this result: no per-request timings" in html
    assert all(int(f["points"]) > 0 for f in _parse(html).figures)


def test_cli_errors_for_html(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(["report", str(CMP_A), str(CMP_B)], capsys)
    assert code == 2 and "--html" in err
    code, _, err = run_cli(["report", str(SWEEP), "--html", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in err
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    code, _, err = run_cli(["report", str(SWEEP), "--html", str(blocker / "out.html")], capsys)
    assert code == 2 and "not a folder" in err and "Traceback" not in err
    out = tmp_path / "deep" / "cmp.html"
    code, _, err = run_cli(["report", str(CMP_A), str(CMP_B), "--html", str(out)], capsys)
    assert code == 0 and out.is_file() and "HTML report written" in err
    assert not list(out.parent.glob(".*.tmp"))  # atomic: no temp file left behind


def test_long_timelines_are_thinned_keeping_spikes_and_dips() -> None:
    from llmdeck.bench.html.series import thin

    t = [i * 0.5 for i in range(7200)]  # an hour at 2 samples a second
    waiting = [0.0] * 7200
    waiting[4001] = 37.0  # one spike
    mem = [20.0] * 7200
    mem[5003] = 3.0  # seed 004's "MemAvailable 3 GiB"
    xs, ys = thin(t, list(waiting))
    assert len(xs) == 300 and max(ys) == 37.0
    _, lows = thin(t, list(mem), "min")
    assert min(lows) == 3.0
    assert thin([0.0, 1.0], [None, 2.0])[1][1] == 2.0


def test_comparison_pairs_scenarios_by_name_or_says_why_not() -> None:
    sweep, over, a = load_result(SWEEP), load_result(OVERLOAD), load_result(CMP_A)
    # one scenario each under different names: compared, and the page says so
    cmp = compare_results([a, over], ["a.json", "over.json"])
    assert len(cmp.scenarios) == 1 and "no scenario name in common" in cmp.note
    assert cmp.scenarios[0].rows[0].judged == ["1 run: not judged"]  # over.json ran once
    # five scenarios against one, none shared: nothing side by side, said on the page
    cmp = compare_results([sweep, over], ["s.json", "o.json"])
    assert cmp.scenarios == [] and "nothing to compare" in cmp.note
    assert "nothing to compare side by side" in render_html([sweep, over], ["s.json", "o.json"])


def test_timeline_from_real_metrics_pages(shared_fixtures: Path) -> None:
    """Two real vLLM 0.22.0 /metrics pages (before and after a bench on the H200) as a timeline: times on
    the scenario's clock, the interval's prefix-cache hit rate, counters since the first scrape, and
    a metric a page lacks as None (not reported), never 0."""
    from llmdeck.bench.monitor import GIB, HostSample, build_timeline
    from llmdeck.client.prom import parse_metrics

    d = shared_fixtures / "vllm-0.22.0-h200"
    before = parse_metrics((d / "metrics-qwen3-0.6b-before.txt").read_text(), t=100.0)
    after = parse_metrics((d / "metrics-qwen3-0.6b-after.txt").read_text(), t=112.5)
    bare = parse_metrics("vllm:num_requests_running 3\n", t=113.0)
    host = [
        HostSample(t=100.0, mem_available=20 * GIB, swap_used=0, page_cache=5 * GIB, gpu_used=[70 * GIB]),
        HostSample(t=112.5, mem_available=3 * GIB, swap_used=GIB, page_cache=None, gpu_used=[None]),
    ]
    tl = build_timeline([before, after, bare], host, t0=99.0)
    assert tl.server_t == [1.0, 13.5, 14.0]
    # 10253 - 13 prefix-cache queries between the pages, no hits: 0%; the first scrape has no interval
    assert tl.prefix_hit_rate_pct == [None, 0.0, None]
    assert tl.preemptions == [0.0, 0.0, None] and tl.running == [0.0, 0.0, 3.0]
    assert tl.waiting == [0.0, 0.0, None] and tl.kv_usage_pct == [0.0, 0.0, None]
    assert tl.mem_available_gib == [20.0, 3.0] and tl.page_cache_gib == [5.0, None]
    assert tl.gpu_used_gib == [[70.0, None]]


def test_html_without_matplotlib_is_a_usage_error_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code, _, err = run_cli(["report", str(SWEEP), "--html", str(tmp_path / "r.html")], capsys)
    assert code == 2 and "llmdeck[plot]" in err and not (tmp_path / "r.html").exists()


def test_a_timeline_column_that_does_not_match_its_clock_is_a_bad_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-edited or cut timeline: exit 2 naming the column (the page had died drawing it, an
    internal error with an empty --json stdout)."""
    source = next(p for p in sorted(RESULTS.glob("*.json")) if '"prefix_hit_rate_pct": [' in p.read_text())
    data = json.loads(source.read_text())
    timelines = [s["timeline"] for s in data["scenarios"] if s.get("timeline")]
    timeline = next(t for t in timelines if t["server_t"])
    timeline["kv_usage_pct"] = timeline["kv_usage_pct"][:-1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, out, err = run_cli(["report", str(bad), "--html", str(tmp_path / "p.html"), "--json"], capsys)
    assert code == 2 and "timeline.kv_usage_pct has" in json.loads(out)["error"]["message"], err
    assert not (tmp_path / "p.html").exists()


@pytest.mark.parametrize("column", ["page_cache_gib", "mem_available_gib", "running", "kv_usage_pct"])
def test_a_timeline_column_not_reported_draws_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str
) -> None:
    """A column with no values is allowed (not reported); the page had died drawing it against its
    clock (an internal error: "x and y must have same first dimension")."""
    source = next(p for p in sorted(RESULTS.glob("*.json")) if '"page_cache_gib": [' in p.read_text())
    data = json.loads(source.read_text())
    timeline = next(s["timeline"] for s in data["scenarios"] if s.get("timeline") and s["timeline"]["host_t"])
    timeline[column] = []
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    code, _, err = run_cli(["report", str(path), "--html", str(tmp_path / "p.html")], capsys)
    assert code == 0 and (tmp_path / "p.html").exists(), err
