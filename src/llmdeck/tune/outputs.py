"""What a tune leaves in its folder: ``spec.json`` (the winner, for `llmdeck up --spec`), the trials
file (written as it went), ``report.html``; and which trial won, and what mattered."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from llmdeck.tune.schema import NoiseDecision, ParamValue, TrialRecord, TrialsHeader, TuneRequest, TuneResult
from llmdeck.tune.trials import TRIALS_NAME

SPEC_NAME = "spec.json"
REPORT_NAME = "report.html"


def config_runs(records: list[TrialRecord]) -> dict[int, list[TrialRecord]]:
    """The measured runs of each config: a trial and its --confirm re-runs, by the first's number."""
    groups: dict[int, list[TrialRecord]] = {}
    for r in records:
        if r.status == "ok" and r.metrics is not None:
            groups.setdefault(r.repeat_of or r.number, []).append(r)
    return groups


def median_goodput(runs: list[TrialRecord]) -> float:
    import statistics

    return statistics.median(r.score for r in runs)


def best_trial(records: list[TrialRecord]) -> TrialRecord | None:
    """The config with the highest median goodput over its runs among those whose every run meets the
    SLOs; when none does, the highest median goodput (the caller says that no config met the SLOs);
    ties go to output throughput. Returned as its first trial."""
    groups = config_runs(records)
    first = {r.number: r for r in records}
    pool = [k for k, runs in groups.items() if all(r.meets_slo for r in runs)] or list(groups)
    if not pool:
        return None

    def rank(k: int) -> tuple[float, float, int]:
        runs = groups[k]
        tput = sum(r.metrics.output_throughput for r in runs if r.metrics) / len(runs)
        return median_goodput(runs), tput, -k

    return first[max(pool, key=rank)]


class Effect(BaseModel):
    """One dimension's effect: the mean goodput per value over the trials that ran."""

    name: str
    means: dict[str, float]
    counts: dict[str, int]
    spread: float


def what_mattered(
    records: list[TrialRecord], dims: list[str], defaults: dict[str, ParamValue] | None = None
) -> list[Effect]:
    """Per dimension, the mean goodput of the measured trials at each value, ranked by spread: a first
    answer to "what mattered", from the trials run. A trial that left a flag to vLLM counts at vLLM's
    own value where plan knows it (``defaults``: prefix caching is *off* by default for a hybrid on
    vLLM 0.22), marked "(default)"; else under "default"."""
    ok = [r for r in records if r.status == "ok"]
    known = defaults or {}
    out: list[Effect] = []
    for name in dims:
        groups: dict[str, list[float]] = {}
        for r in ok:
            value: ParamValue | str = r.params.get(name, known.get(name, "default"))
            key = f"{value} (default)" if name in known and str(value) == str(known[name]) else str(value)
            groups.setdefault(key, []).append(r.score)
        if len(groups) < 2:
            continue
        means = {k: sum(v) / len(v) for k, v in groups.items()}
        out.append(
            Effect(
                name=name,
                means=means,
                counts={k: len(v) for k, v in groups.items()},
                spread=max(means.values()) - min(means.values()),
            )
        )
    return sorted(out, key=lambda e: -e.spread)


def chosen(
    records: list[TrialRecord], max_repeats: int, *, budget_stopped: bool | None = False
) -> tuple[TrialRecord | None, NoiseDecision | None]:
    """The config a tune writes and the noise decision behind it: the best (llmdeck.tune.outputs), or,
    when it is within noise of a contender, the simplest config of the tie — not the best median."""
    from llmdeck.tune.noise import decide

    best = best_trial(records)
    noise = decide(records, max_repeats, budget_stopped=budget_stopped)
    if noise is not None:
        best = next(r for r in records if r.number == noise.chosen)
    return best, noise


def best_runs(records: list[TrialRecord], best: TrialRecord | None) -> list[float]:
    return [r.score for r in config_runs(records).get(best.number, [])] if best else []


def winning_spec(req: TuneRequest, best: TrialRecord) -> object:
    """The winner as a launch spec: its flags and the environment its trial ran with (the tune's
    engine variables too — ``VLLM_USE_DEEP_GEMM=0`` of ``--deep-gemm-warmup off`` changes the kernels),
    never the secrets."""
    from llmdeck.tune.trial import engine_env

    env = {**engine_env(req), **req.base.env, **best.env}
    return req.base.model_copy(update={"vllm_args": best.args, "env": env})


def write_outputs(
    req: TuneRequest,
    header: TrialsHeader,
    records: list[TrialRecord],
    out_dir: Path,
    *,
    resumed: int,
    ran: int,
    stopped_by: Literal["trials", "budget", "space"],
) -> TuneResult:
    from llmdeck.engines.spec import LaunchSpec, write_spec_file

    best, noise = chosen(records, req.max_repeats, budget_stopped=stopped_by == "budget")
    spec_path: Path | None = None
    if best is not None:
        spec = winning_spec(req, best)
        assert isinstance(spec, LaunchSpec)
        spec_path = out_dir / SPEC_NAME
        write_spec_file(spec_path, spec)
    report_path = _report(header, records, best, out_dir, noise)
    return TuneResult(
        out_dir=str(out_dir),
        trials_file=str(out_dir / TRIALS_NAME),
        spec_file=str(spec_path) if spec_path else None,
        report_file=str(report_path) if report_path else None,
        resumed=resumed,
        ran=ran,
        best=best,
        best_runs=best_runs(records, best),
        trials=records,
        stopped_by=stopped_by,
        noise=noise,
    )


def _report(
    header: TrialsHeader,
    records: list[TrialRecord],
    best: TrialRecord | None,
    out_dir: Path,
    noise: NoiseDecision | None = None,
) -> Path | None:
    """The HTML page, when matplotlib is there to draw it (llmdeck[plot]); None otherwise."""
    from llmdeck.errors import MissingDependencyError
    from llmdeck.tune.html import write_tune_report

    path = out_dir / REPORT_NAME
    try:
        write_tune_report(header, records, best, path, noise)
    except MissingDependencyError:
        return None
    return path
