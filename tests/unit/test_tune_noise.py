"""`llmdeck tune`'s adaptive repeats (llmdeck.tune.noise) on synthetic trial results, no engine: when
two configs are told apart, the re-measure loop (order, cap, failed re-runs, budget) and --confirm's
re-runs, the "within noise" verdict and its simplest-config rule, in the JSON result, the CLI's words
and the page."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from llmdeck.engines.spec import LaunchSpec
from llmdeck.tune.noise import MIN_RUNS, contenders, decide, flags_set, next_round, samples, separated
from llmdeck.tune.schema import (
    Origin,
    ParamValue,
    TrialMetrics,
    TrialRecord,
    TrialsHeader,
    TuneEvent,
    TuneRequest,
)
from llmdeck.tune.slo import parse_slo_targets
from llmdeck.tune.workload import load_shape

SEARCHED: dict[str, ParamValue] = {"max-num-seqs": 4, "enable-prefix-caching": True}


def _req(**kw: Any) -> TuneRequest:
    base = LaunchSpec(name="tuned", engine="cpu", model="/m", vllm_args=[])
    values: dict[str, Any] = {
        "base": base, "model_ref": "/m", "workload": "agent", "load": load_shape("agent", concurrency=4),
        "slo": parse_slo_targets("ttft_p99=2s"), "budget_s": 600, "trials": 3,
    }  # fmt: skip
    values.update(kw)
    return TuneRequest.model_validate(values)


def _rec(
    n: int,
    params: dict[str, ParamValue],
    runs: list[float],
    origin: Origin = "search",
    repeat_of: int | None = None,
    meets: bool = True,
) -> TrialRecord:
    m = TrialMetrics(
        goodput=sorted(runs)[len(runs) // 2], request_throughput=1.0, output_throughput=10.0,
        completed=8, failed=0, slo_values_ms={"ttft_p99": 100.0}, runs=len(runs), goodput_runs=runs,
    )  # fmt: skip
    return TrialRecord(
        number=n, params=params, origin=origin, status="ok", metrics=m, meets_slo=meets, repeat_of=repeat_of
    )


def test_separation_needs_min_runs_each_and_disjoint_ranges() -> None:
    assert MIN_RUNS == 3
    assert not separated([2.0, 2.1], [1.0, 1.1])  # apart, but 2 runs each: 1 in 3 by chance
    assert separated([2.0, 2.1, 2.2], [1.0, 1.1, 1.2])
    assert separated([1.0, 1.1, 1.2], [2.0, 2.1, 2.2])  # either way round
    assert not separated([2.0, 2.1, 1.15], [1.0, 1.1, 1.2])  # one run of A inside B's range
    rec = _rec(1, {}, [1.0, 1.5])
    again = _rec(2, {}, [2.0], origin="recheck", repeat_of=1)
    assert samples([rec, again]) == [1.0, 1.5, 2.0]  # every --repeat run of every trial of the config
    bare = _rec(3, {}, [1.7])
    assert bare.metrics is not None
    bare.metrics.goodput_runs = []
    assert samples([bare]) == [1.7]  # a trial without per-run goodputs counts as one run


def test_contenders_are_the_runner_up_the_defaults_and_the_candidates_that_meet_the_slos() -> None:
    records = [
        _rec(1, {}, [1.0], origin="default"),
        _rec(2, {"max-num-seqs": 8}, [1.2], origin="given"),
        _rec(3, SEARCHED, [3.0]),
        _rec(4, {"max-num-seqs": 2, "enable-prefix-caching": False}, [2.5]),
        _rec(5, {"max-num-seqs": 1, "enable-prefix-caching": False}, [2.0]),
        _rec(6, {"max-num-seqs": 16}, [9.0], origin="given", meets=False),  # misses: told apart already
    ]
    assert contenders(records, 3) == [4, 1, 2]
    assert flags_set(records[0]) == 0 and flags_set(records[2]) == 2
    assert flags_set(_rec(7, {"max-num-seqs": None, "cudagraph": "default"}, [1.0])) == 0


def _simulate(truth: dict[int, list[float]], cap: int, budget_runs: int = 99) -> list[TrialRecord]:
    """The recheck loop of search._recheck over a fake measurement: config n's k-th run is truth[n][k]."""
    records = [_rec(1, {}, truth[1][:1], origin="default"), _rec(2, SEARCHED, truth[2][:1])]
    first = {r.number: r for r in records}
    made = 0
    while todo := next_round(records, cap):
        for n in todo:
            if made >= budget_runs:
                return records
            k = sum((r.repeat_of or r.number) == n for r in records)
            records.append(_rec(len(records) + 1, first[n].params, [truth[n][k]], "recheck", repeat_of=n))
            made += 1
    return records


def test_rechecks_alternate_until_the_two_separate() -> None:
    records = _simulate({1: [1.0, 1.1, 0.9, 1.0], 2: [1.5, 1.6, 1.4, 1.5]}, cap=4)
    order = [(r.repeat_of, r.number) for r in records[2:]]
    assert order == [(1, 3), (2, 4), (2, 5), (1, 6)]  # contender first, then leader first
    d = decide(records, 4)
    assert d is not None and not d.within_noise and d.chosen == d.leader == 2
    assert d.stopped_by == "separated" and d.comparisons[0].separated
    assert "wins" in d.message and "trial 1 (vLLM's defaults)" in d.message


def test_overlap_until_the_cap_is_within_noise_and_the_simplest_config_is_chosen() -> None:
    records = _simulate({1: [1.0, 1.4, 1.2, 1.3], 2: [1.3, 1.1, 1.35, 1.25]}, cap=3)
    assert len(records) == 6  # each config measured in 3 trials: the cap
    assert next_round(records, 3) == []
    d = decide(records, 3)
    assert d is not None and d.within_noise and d.stopped_by == "max-repeats"
    assert d.leader == 2 and d.chosen == 1  # the defaults: no flag set beats a higher median in noise
    assert sorted(d.tied) == [1, 2]
    assert d.message.startswith("within noise") and "no winner is named" in d.message


def test_the_budget_stopping_the_rechecks_is_said() -> None:
    records = _simulate({1: [1.0, 1.4, 1.2], 2: [1.3, 1.1, 1.35]}, cap=3, budget_runs=1)
    d = decide(records, 3, budget_stopped=True)
    assert d is not None and d.within_noise and d.stopped_by == "budget" and "budget" in d.message


def test_max_repeats_1_is_off_and_a_failed_recheck_counts_toward_the_cap() -> None:
    records = [_rec(1, {}, [1.0], origin="default"), _rec(2, SEARCHED, [1.1])]
    assert next_round(records, 1) == [] and decide(records, 1) is None
    failed = TrialRecord(number=3, params={}, origin="recheck", status="failed", repeat_of=1)
    records.append(failed)  # the defaults' re-run failed to start: one of its 2 tries spent
    assert next_round(records, 2) == [2]


def test_one_config_alone_is_not_within_noise() -> None:
    d = decide([_rec(1, SEARCHED, [2.0])], 3)
    assert d is not None and not d.within_noise and d.comparisons == [] and "no contender" in d.message


def test_search_recheck_runs_the_rounds_through_the_runner() -> None:
    from llmdeck.tune.search import _recheck

    truth = {1: [1.0, 1.1, 0.9], 2: [1.5, 1.6, 1.4]}
    records = [_rec(1, {}, truth[1][:1], origin="default"), _rec(2, SEARCHED, truth[2][:1])]

    class FakeRunner:  # stands in for search.Runner: no server, the runs come from `truth`
        req = _req(max_repeats=3)

        def events(self, ev: TuneEvent) -> None:
            pass

        def one(self, n: int, params: dict[str, ParamValue], origin: Origin, repeat_of: int) -> TrialRecord:
            k = sum((r.repeat_of or r.number) == repeat_of for r in records)
            return _rec(n, params, [truth[repeat_of][k]], origin, repeat_of=repeat_of)

    runner: Any = FakeRunner()
    assert _recheck(runner, records, time.monotonic())
    assert [(r.origin, r.repeat_of) for r in records[2:]] == [
        ("recheck", 1), ("recheck", 2), ("recheck", 2), ("recheck", 1)
    ]  # fmt: skip
    d = decide(records, 3)
    assert d is not None and not d.within_noise and d.chosen == 2


def test_search_confirm_reruns_the_leader_and_the_defaults_through_the_runner(tmp_path: Path) -> None:
    """--confirm 1 through the runner: the leader, then vLLM's defaults, once more each with their own
    params; the result's best rests on both of its runs. (The CPU integration test ran --confirm on the
    real engine: one more start in make test for the same runner call every trial makes.)"""
    from llmdeck.tune.outputs import write_outputs
    from llmdeck.tune.schema import Dimension
    from llmdeck.tune.search import _confirm
    from llmdeck.tune.trials import TRIALS_NAME

    truth = {1: [1.0, 0.9], 2: [1.5, 1.4]}
    req = _req(confirm=1, max_repeats=1)  # adaptive repeats off, as the CPU test had them
    records = [_rec(1, {}, truth[1][:1], origin="default"), _rec(2, SEARCHED, truth[2][:1])]

    class FakeRunner:  # stands in for search.Runner: no server, the runs come from `truth`
        def __init__(self) -> None:
            self.req = req

        def events(self, ev: TuneEvent) -> None:
            pass

        def one(self, n: int, params: dict[str, ParamValue], origin: Origin, repeat_of: int) -> TrialRecord:
            return _rec(n, params, truth[repeat_of][1:], origin, repeat_of=repeat_of)

    runner: Any = FakeRunner()
    assert _confirm(runner, records, time.monotonic())
    assert [(r.origin, r.repeat_of, r.params) for r in records[2:]] == [
        ("confirm", 2, SEARCHED),
        ("confirm", 1, {}),
    ]
    assert _confirm(runner, records, time.monotonic()) and len(records) == 4  # each config re-runs once
    for r in records:
        r.args = ["--max-num-seqs", "4", "--enable-prefix-caching"] if r.params else []
    space = [
        Dimension(name="max-num-seqs", values=[1, 4]),
        Dimension(name="enable-prefix-caching", values=[True]),
    ]
    header = TrialsHeader(fingerprint=req.fingerprint(), request=req, space=space)
    (tmp_path / TRIALS_NAME).write_text(header.model_dump_json() + "\n")
    result = write_outputs(req, header, records, tmp_path, resumed=0, ran=4, stopped_by="trials")
    assert result.best is not None and result.best.number == 2 and sorted(result.best_runs) == [1.4, 1.5]


def test_within_noise_reaches_the_json_the_spec_and_the_page(tmp_path: Path) -> None:
    from llmdeck.engines.spec import read_spec_file
    from llmdeck.tune.outputs import write_outputs
    from llmdeck.tune.schema import Dimension
    from llmdeck.tune.trials import TRIALS_NAME

    req = _req()
    space = [
        Dimension(name="max-num-seqs", values=[1, 4]),
        Dimension(name="enable-prefix-caching", values=[True]),
    ]
    header = TrialsHeader(fingerprint=req.fingerprint(), request=req, space=space)
    records = _simulate({1: [1.0, 1.4, 1.2], 2: [1.3, 1.1, 1.35]}, cap=3)
    records[0].args = []
    for r in records:
        if (r.repeat_of or r.number) == 2:
            r.args = ["--max-num-seqs", "4", "--enable-prefix-caching"]
    (tmp_path / TRIALS_NAME).write_text(header.model_dump_json() + "\n")
    result = write_outputs(req, header, records, tmp_path, resumed=0, ran=6, stopped_by="trials")
    assert result.noise is not None and result.noise.within_noise
    data = result.model_dump(mode="json")
    assert (
        data["noise"]["within_noise"] is True and data["noise"]["chosen"] == 1 and data["best"]["number"] == 1
    )
    assert read_spec_file(Path(str(result.spec_file))).vllm_args == []  # vLLM's defaults written
    if result.report_file:
        html = Path(result.report_file).read_text()
        assert "Within noise" in html and "no winner is named" in html
