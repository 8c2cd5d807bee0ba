"""`llmdeck tune --find-max-rate`'s step and bisection logic (llmdeck.tune.ratesweep) with a fake
measure function (a server whose SLOs hold up to a set rate), no engine; and the option through the
request: the load carries the sweep, a tune without it keeps its old fingerprint."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from llmdeck.tune.ratesweep import best_step, bracket, find_max_rate, next_rate
from llmdeck.tune.schema import RateStep, RateSweep


def _server(capacity: float, flaky: set[int] | None = None) -> Callable[[float, int], RateStep]:
    """Meets the SLOs up to ``capacity`` req/s; the steps in ``flaky`` miss whatever the rate (noise)."""

    def measure(rate: float, k: int) -> RateStep:
        ok = rate <= capacity and k not in (flaky or set())
        return RateStep(rate=rate, goodput=min(rate, capacity) * (1.0 if ok else 0.5), meets_slo=ok)

    return measure


def test_geometric_steps_up_then_bisection_to_the_resolution() -> None:
    steps = find_max_rate(_server(5.3), RateSweep(start=1.0, factor=2.0, max_steps=10, resolution=0.1))
    rates = [round(s.rate, 3) for s in steps]
    assert rates[:4] == [1.0, 2.0, 4.0, 8.0]  # doubling until a miss
    assert rates[4] == round(math.sqrt(32), 3)  # then the geometric midpoint of 4..8
    lo, hi = bracket(steps)
    assert lo is not None and hi is not None and hi <= lo * 1.1  # stopped at 10% resolution
    top = best_step(steps)
    assert top is not None and top.rate == lo and 5.3 / 1.1 <= top.rate <= 5.3
    assert len(steps) == 7


def test_a_first_rate_too_high_steps_down() -> None:
    steps = find_max_rate(_server(3.0), RateSweep(start=10.0, factor=2.0, max_steps=12))
    assert [s.rate for s in steps[:3]] == [10.0, 5.0, 2.5]
    top = best_step(steps)
    assert top is not None and 3.0 / 1.1 <= top.rate <= 3.0


def test_the_number_of_steps_is_bounded() -> None:
    never = find_max_rate(_server(0.0), RateSweep(start=1.0, max_steps=5))
    assert len(never) == 5 and best_step(never) is None  # no rate met the SLOs: the trial misses them
    always = find_max_rate(_server(1e9), RateSweep(start=1.0, max_steps=4))
    assert [s.rate for s in always] == [1.0, 2.0, 4.0, 8.0]
    assert next_rate(always, RateSweep(start=1.0, max_steps=4)) is None


def test_a_miss_below_a_pass_does_not_undo_the_pass() -> None:
    # step 2 (rate 2) misses by noise: the sweep bisects 1..2 (it cannot know), and stays bounded
    steps = find_max_rate(_server(5.0, flaky={1}), RateSweep(start=1.0, max_steps=3))
    assert [(round(s.rate, 3), s.meets_slo) for s in steps] == [(1.0, True), (2.0, False), (1.414, True)]
    # a pass above a miss: the bracket is the highest pass and the lowest miss above it
    hand = [
        RateStep(rate=r, goodput=r, meets_slo=ok) for r, ok in ((1, True), (2, False), (4, True), (8, False))
    ]
    assert bracket(hand) == (4, 8)
    assert next_rate(hand, RateSweep(max_steps=10)) == pytest.approx(math.sqrt(32))


def test_stop_ends_the_sweep_early() -> None:
    calls: list[float] = []

    def measure(rate: float, k: int) -> RateStep:
        calls.append(rate)
        return RateStep(rate=rate, goodput=rate, meets_slo=True)

    steps = find_max_rate(measure, RateSweep(max_steps=8), stop=lambda: len(calls) >= 2)
    assert len(steps) == 2


def test_the_option_reaches_the_load_and_old_fingerprints_hold(tmp_path: Path) -> None:
    import hashlib
    import json

    from llmdeck.errors import UsageError
    from llmdeck.settings import Settings
    from llmdeck.tune.request import make_request

    settings = Settings(state_dir=tmp_path)  # type: ignore[call-arg]

    def req(sweep: dict[str, float] | None) -> object:
        return make_request(
            settings, model=str(tmp_path), spec_file=None, workload="multi-user", prompts=None,
            slo="ttft_p99=2s", budget="10m", trials=3, extra_args=[], spec_overrides={"engine": "cpu"},
            load={"concurrency": 4}, options={"rate_sweep": sweep, "max_repeats": 2},
        )  # fmt: skip

    plain, swept = req(None), req({"start": 0.5, "max_steps": 6})
    from llmdeck.tune.schema import TuneRequest

    assert isinstance(plain, TuneRequest) and isinstance(swept, TuneRequest)
    assert plain.load.rate_sweep is None and plain.max_repeats == 2
    assert swept.load.rate_sweep == RateSweep(start=0.5, max_steps=6)
    assert plain.fingerprint() != swept.fingerprint()
    old_load = {k: v for k, v in plain.load.model_dump().items() if k != "rate_sweep"}
    same = {
        "model": plain.base.model, "engine": plain.base.engine, "base_args": plain.base.vllm_args,
        "base_env": sorted(plain.base.env), "machine": plain.machine, "workload": plain.workload,
        "prompts": None, "load": old_load, "slo": [t.model_dump() for t in plain.slo],
    }  # fmt: skip
    assert plain.fingerprint() == hashlib.sha256(json.dumps(same, sort_keys=True).encode()).hexdigest()[:16]
    with pytest.raises(UsageError, match="rate sweep"):
        req({"start": 0.0, "max_steps": 6})
    with pytest.raises(UsageError, match="rate sweep"):
        req({"start": 1.0, "max_steps": 1})


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--find-max-rate", "--rate-start", "0"], "--rate-start"),
        (["--find-max-rate", "--rate-steps", "1"], "--rate-steps"),
        (["--max-repeats", "0"], "--max-repeats"),
        (["--rate-steps", "4"], "only take effect with --find-max-rate"),
    ],
)
def test_bad_sweep_or_repeat_options_exit_2(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_helpers import run_cli

    code, out, err = run_cli(["tune", "some-model", "-w", "agent", "--slo", "ttft_p99=2s", *args], capsys)
    assert code == 2 and says in err and "Traceback" not in err and out == ""
