"""Comparing result files: per scenario and metric, each file's median over its runs (``--repeat``)
with the min-max range, the change against the first file, and the environments side by side.

A difference is called better or worse only when both sides have two or more runs and their
min-max ranges do not overlap: on an H200 the same client's mean TTFT moved 4.3% and 6.4% between
runs (benchmarks/README.md), so a single run on either side, or ranges that overlap, is shown
uncoloured as "within noise" / "1 run: not judged".
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from llmdeck.bench.html.view import Chart, Num, environment, num
from llmdeck.bench.repeats import METRICS, spread
from llmdeck.bench.result_schema import BenchResult, ScenarioResult

# metric -> (name, format, higher is better, JSON path inside a scenario)
COMPARED: dict[str, tuple[str, str, bool, str]] = {
    "mean_ttft_ms": ("Mean TTFT", "ms2", False, "metrics.ttft_ms.mean"),
    "p99_ttft_ms": ("P99 TTFT", "ms2", False, "metrics.ttft_ms.percentiles.p99"),
    "mean_tpot_ms": ("Mean TPOT", "ms2", False, "metrics.tpot_ms.mean"),
    "mean_itl_ms": ("Mean ITL", "ms2", False, "metrics.itl_ms.mean"),
    "output_throughput": ("Output tok/s", "rate", True, "metrics.output_throughput"),
    "server_mean_ttft_ms": ("Server's own TTFT", "ms2", False, "server_metrics.server_mean_ttft_ms"),
}


class Side(BaseModel):
    file_no: int
    median: Num
    min: Num | None = None
    max: Num | None = None
    runs: int


class DeltaRow(BaseModel):
    metric: str
    sides: list[Side | None] = Field(description="One per file, None when that file lacks the metric.")
    deltas: list[str] = Field(description="Per file after the first: change of the median, in %.")
    judged: list[str] = Field(description='better / worse / "within noise" / "1 run: not judged" / "-"')


class ScenarioDiff(BaseModel):
    key: str
    label: str
    files: list[int] = Field(description="Which files have this scenario.")
    rows: list[DeltaRow]
    charts: list[Chart] = Field(default_factory=list)


class EnvRow(BaseModel):
    key: str
    values: list[str]
    differs: bool


class Comparison(BaseModel):
    files: list[str]
    letters: list[str]
    scenarios: list[ScenarioDiff]
    env: list[EnvRow]
    note: str = ""


def runs_by_scenario(result: BenchResult) -> dict[str, list[tuple[int, ScenarioResult]]]:
    """Finished runs by scenario name (the name without the ``#R`` of ``--repeat``), in order."""
    out: dict[str, list[tuple[int, ScenarioResult]]] = {}
    for i, sr in enumerate(result.scenarios):
        if sr.status == "done" and sr.metrics is not None:
            out.setdefault(sr.spec.repeat_of or sr.spec.name, []).append((i, sr))
    return out


def _side(
    result: BenchResult, file_no: int, key: str, runs: list[tuple[int, ScenarioResult]], metric: str
) -> Side | None:
    get = METRICS[metric]
    vals = [(i, v) for i, sr in runs if sr.metrics is not None and (v := get(sr.metrics, sr)) is not None]
    if not vals:
        return None
    _, fmt, _, path = COMPARED[metric]
    if len(vals) == 1:
        i, v = vals[0]
        return Side(file_no=file_no, median=num(v, fmt, f"{file_no}:scenarios.{i}.{path}"), runs=1)
    sp = spread([v for _, v in vals])
    j = next((j for j, su in enumerate(result.repeats) if su.scenario == key and metric in su.metrics), None)
    src = f"{file_no}:repeats.{j}.metrics.{metric}" if j is not None else None
    recorded = result.repeats[j].metrics[metric] if j is not None else None
    if recorded is None or recorded.median != sp.median:  # a summary that is not these runs': no src
        src = None
    return Side(
        file_no=file_no,
        median=num(sp.median, fmt, f"{src}.median" if src else None),
        min=num(sp.min, fmt, f"{src}.min" if src else None),
        max=num(sp.max, fmt, f"{src}.max" if src else None),
        runs=len(vals),
    )


def judge(base: Side, other: Side, higher_better: bool) -> str:
    """better/worse only when both have >= 2 runs and the ranges do not overlap."""
    if base.runs < 2 or other.runs < 2:
        return "1 run: not judged"
    assert base.min and base.max and other.min and other.max
    bmin, bmax = base.min.value or 0.0, base.max.value or 0.0
    omin, omax = other.min.value or 0.0, other.max.value or 0.0
    if omin <= bmax and omax >= bmin:
        return "within noise"
    up = omin > bmax
    return "better" if up == higher_better else "worse"


def _delta_row(metric: str, sides: list[Side | None]) -> DeltaRow:
    name, _, higher, _ = COMPARED[metric]
    base = sides[0]
    deltas, judged = [], []
    for s in sides[1:]:
        if base is None or s is None or not base.median.value:
            deltas.append("-")
            judged.append("-")
            continue
        d = ((s.median.value or 0.0) - base.median.value) / base.median.value * 100.0
        deltas.append(f"{d:+.1f}%")
        judged.append(judge(base, s, higher))
    return DeltaRow(metric=name, sides=sides, deltas=deltas, judged=judged)


def _pairing(groups: list[dict[str, list[tuple[int, ScenarioResult]]]]) -> tuple[list[list[str | None]], str]:
    """Scenario names to compare, per file; by name, or the only scenario of each file."""
    names = list(groups[0])
    for g in groups[1:]:
        names += [n for n in g if n not in names]
    shared = [n for n in names if sum(n in g for g in groups) >= 2]
    if shared:
        return [[n if n in g else None for g in groups] for n in shared], ""
    if all(len(g) == 1 for g in groups):
        return [[next(iter(g)) for g in groups]], (
            "The files have no scenario name in common; each file's only scenario is compared."
        )
    return [], "The files have no scenario name in common: nothing to compare side by side."


def compare_results(results: list[BenchResult], files: list[str]) -> Comparison:
    groups = [runs_by_scenario(r) for r in results]
    pairs, note = _pairing(groups)
    scenarios = []
    for names in pairs:
        rows = []
        for metric in COMPARED:
            sides = [
                None if n is None else _side(r, k, n, g[n], metric)
                for k, (r, g, n) in enumerate(zip(results, groups, names, strict=True))
            ]
            if any(s is not None for s in sides):
                rows.append(_delta_row(metric, sides))
        first = next(k for k, n in enumerate(names) if n is not None)
        name = names[first] or ""
        sr0 = groups[first][name][0][1]
        label = sr0.spec.model_copy(update={"repeat": None}).label()
        scenarios.append(
            ScenarioDiff(
                key=name, label=label, files=[k for k, n in enumerate(names) if n is not None], rows=rows
            )
        )
    envs = [environment(r) for r in results]
    env = [
        EnvRow(key=k, values=[e.get(k, "-") for e in envs], differs=len({e.get(k) for e in envs}) > 1)
        for k in envs[0]
    ]
    letters = [chr(ord("A") + k) if k < 26 else f"F{k}" for k in range(len(files))]
    return Comparison(files=files, letters=letters, scenarios=scenarios, env=env, note=note)


def pooled_runs(results: list[BenchResult], diff: ScenarioDiff) -> list[list[ScenarioResult]]:
    """Per file of ``diff``: the runs of its scenario (for the overlaid distributions)."""
    out = []
    for k in diff.files:
        g = runs_by_scenario(results[k])
        runs = g.get(diff.key) or (next(iter(g.values())) if len(g) == 1 else [])
        out.append([sr for _, sr in runs])
    return out
