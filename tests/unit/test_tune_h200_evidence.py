"""The committed H200 tune run (evidence/tune/h200/): read back with llmdeck's own loader, its
figures recomputed from the bench results it kept, and the README's claims checked against the logs."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from repo_paths import ROOT

H200 = ROOT / "evidence" / "tune" / "h200"


def _records() -> list:  # type: ignore[type-arg]
    from llmdeck.tune.trials import read_trials

    return read_trials(H200 / "trials.jsonl")[1]


def test_the_trials_load_and_give_the_readmes_ratios() -> None:
    from llmdeck.tune.outputs import best_trial

    recs = _records()
    assert [(r.origin, r.status) for r in recs] == [
        ("default", "ok"), ("given", "ok"), ("search", "ok"), ("given", "ok")
    ]  # fmt: skip
    score = {r.number: r.score for r in recs}
    assert round(score[1], 2) == 4.51 and round(score[2], 2) == 0.35
    best = best_trial(recs)
    assert best is not None and best.origin == "default"  # the spec is vLLM's defaults
    assert score[1] / score[2] >= 1.3 and round(score[1] / score[2], 1) == 12.8
    assert max(recs[1].metrics.goodput_runs) < min(recs[0].metrics.goodput_runs)  # runs apart
    assert not any(r.meets_slo for r in recs)
    assert json.loads((H200 / "spec.json").read_text())["env"] == {}  # as written before the fix


def test_the_defaults_are_on_the_pareto_front() -> None:
    from llmdeck.tune.html import pareto_front

    points = [
        (r.number, r.metrics.slo_values_ms["ttft_p99"], r.metrics.output_throughput) for r in _records()
    ]
    assert pareto_front(points) == {1, 4}


def test_goodput_recomputed_from_the_kept_requests() -> None:
    """vLLM's goodput: requests whose own TTFT <= 2 s and TPOT <= 100 ms, over the run's duration."""
    for rec in _records():
        bench = json.loads(gzip.decompress((H200 / "bench" / f"trial-{rec.number:03d}.json.gz").read_bytes()))
        runs = []
        for sc in bench["scenarios"]:
            good = 0
            for r in sc["requests"]:
                out = r["output_tokens"]
                tpot = (r["latency"] - r["ttft"]) / (out - 1)
                good += r["ok"] and r["ttft"] <= 2.0 and tpot <= 0.1
            runs.append(good / sc["metrics"]["duration_s"])
        assert np.allclose(runs, rec.metrics.goodput_runs, rtol=1e-9)
        assert round(float(np.median(runs)), 6) == round(rec.score, 6)


def test_the_logs_say_what_the_readme_says() -> None:
    logs = {n: (H200 / "logs" / f"trial-{n:03d}.log").read_text() for n in (1, 2, 3, 4)}
    assert "enable_prefix_caching=False" in logs[1] and "enable_prefix_caching=False" in logs[4]
    for n in (2, 3):  # prefix caching on: ~half the prompt tokens hit
        hits = [float(x) for x in re.findall(r"Prefix cache hit rate: ([0-9.]+)%", logs[n])]
        assert max(hits) > 45
    for log in logs.values():  # DeepGEMM off: CUTLASS block-FP8 linears, Triton MoE
        assert "CutlassFp8BlockScaledMMKernel" in log and "Using TRITON Fp8 MoE backend" in log
        assert "Model loading took 33.38 GiB" in log
    blocks = {n: re.search(r"block size to (\d+) tokens", log).group(1) for n, log in logs.items()}  # type: ignore[union-attr]
    assert blocks == {1: "1056", 2: "2096", 3: "2096", 4: "1056"}


def test_the_first_move_for_this_shape_is_the_one_the_readme_names() -> None:
    from llmdeck.tune.moves import first_moves
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.schema import Dimension, TuneRequest
    from llmdeck.tune.search import prepare

    header = json.loads((H200 / "trials.jsonl").read_text().splitlines()[0])
    req = TuneRequest.model_validate({**header["request"], "model_ref": "Qwen3.6-35B-A3B-FP8"})
    pruner = Pruner(req)
    fresh, base_args = prepare(req, pruner)
    ((params, _),) = first_moves(req, pruner, base_args, fresh.space)
    assert params["enable-prefix-caching"] is True and params["max-num-batched-tokens"] == 8448
    # the header this run wrote has no whole-block chunk >= 8192: a resume of it proposes no move
    written = [Dimension.model_validate(d) for d in header["space"]]
    assert first_moves(req, pruner, base_args, written) == []


def test_report_reads_a_tune_folder_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`llmdeck report DIR`: the config a tune chose and why (its noise rule re-applied: at 2 runs a side
    nothing is "apart", which the sentence says), --json, and the page again with --html."""
    code, out, _ = run_cli(["report", str(H200)], capsys)
    assert code == 0 and "chosen: trial 1 (default)" in out
    assert "within noise" in out and "apart but under 3 runs a side" in out and "before" not in out
    code, out, _ = run_cli(["report", str(H200 / "trials.jsonl"), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["best"]["number"] == 1 and data["noise"]["within_noise"] is True
    assert len(data["trials"]) == 4 and data["noise"]["stopped_by"] == "unknown"
    # written before trials recorded where their start went: read from the kept logs
    assert data["trials"][0]["start_phases"]["profiling + KV cache"] == 111.0
    code, _, _err = run_cli(["report", str(H200), "--html", str(tmp_path / "t.html")], capsys)
    page = (tmp_path / "t.html").read_text()
    assert code == 0 and "Pareto" in page and "Where the time went" in page


@pytest.mark.parametrize("extra", [["--plot", "x.png"], []])
def test_report_refuses_what_is_not_a_tune(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str]
) -> None:
    bad = tmp_path / "other.jsonl"
    bad.write_text('{"kind": "something else"}\n')
    target = [str(H200)] if extra else [str(bad)]
    code, _, err = run_cli(["report", *target, *extra], capsys)
    assert code == 2 and "Traceback" not in err
    assert ("for bench results" in err) if extra else ("not a tune folder" in err)


def test_report_quotes_a_hostile_flag_for_the_shell(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trials file from elsewhere is data: `$(...)` in a flag prints quoted, escapes as text."""
    lines = (H200 / "trials.jsonl").read_text().splitlines()
    trial = json.loads(lines[1])
    trial["args"] += ["--served-model-name", "$(touch /tmp/pwned)\x1b[31m"]
    trial["origin"], trial["params"] = "search", {"max-num-seqs": "8\x1b]0;title\x07"}  # printed too
    (tmp_path / "trials.jsonl").write_text(lines[0] + "\n" + json.dumps(trial) + "\n")
    code, out, _ = run_cli(["report", str(tmp_path)], capsys)
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert "'$(touch /tmp/pwned)" in out or "$'$(touch /tmp/pwned)" in out
    assert "max-num-seqs=8\\x1b]0;title\\x07" in out  # shown as data


S14 = H200 / "s14"


def _vllm_goodput_runs(path: Path) -> list[float]:
    """vLLM's goodput per run from the kept requests: own TTFT <= 2 s and TPOT <= 100 ms, over the run."""
    bench = json.loads(gzip.decompress(path.read_bytes()))
    runs = []
    for sc in bench["scenarios"]:
        good = sum(
            r["ok"] and r["ttft"] <= 2.0 and (r["latency"] - r["ttft"]) / (r["output_tokens"] - 1) <= 0.1
            for r in sc["requests"]
        )
        runs.append(good / sc["metrics"]["duration_s"])
    return runs


def test_session_14_first_move_beats_the_defaults_with_runs_apart() -> None:
    """The README's session-14 table: the defaults (tune trial 1, 3 runs) against the first move (2 runs,
    a second machine) — 1.34x, every first-move run above every defaults run of both sessions."""
    from llmdeck.tune.trials import read_trials

    header, recs = read_trials(S14 / "trials.jsonl")
    assert [(r.origin, r.status, r.metrics.runs) for r in recs] == [("default", "ok", 3)]
    defaults = recs[0].metrics.goodput_runs
    assert np.allclose(_vllm_goodput_runs(S14 / "bench" / "trial-001.json.gz"), defaults, rtol=1e-9)
    first = _vllm_goodput_runs(S14 / "bench" / "firstmove.json.gz")
    assert [round(g, 2) for g in first] == [5.66, 5.61]
    ratio = float(np.median(first)) / recs[0].score
    assert round(ratio, 2) == 1.34 and ratio >= 1.1
    s13_defaults = _records()[0].metrics.goodput_runs
    assert min(first) > max(defaults + s13_defaults)
    assert float(np.median(first)) / _records()[1].score >= 1.3  # seed 000, session 13
    assert header.request.slo and {t.key for t in header.request.slo} == {"ttft_p99", "tpot_p99"}


def test_session_14_first_move_spec_is_trial_1_plus_the_move() -> None:
    """What ran on the second machine is what the tune's first move proposes for this shape."""
    spec = json.loads((H200.parent / "spec-firstmove.json").read_text())
    trial1 = json.loads((S14 / "trials.jsonl").read_text().splitlines()[1])
    move = ["--enable-prefix-caching", "--max-num-batched-tokens", "8448"]
    assert spec["vllm_args"] == [*trial1["args"], *move]
    assert spec["env"] == {"TRITON_CACHE_AUTOTUNING": "1", "VLLM_USE_DEEP_GEMM": "0"}
    bench = json.loads(gzip.decompress((S14 / "bench" / "firstmove.json.gz").read_bytes()))
    assert bench["request"]["num_prompts"] == 64 and bench["request"]["prefix_len"] == 4096
    assert bench["request"]["temperature"] == 0.0 and bench["request"]["max_concurrencies"] == [16]
    up = (S14 / "up.txt").read_text()
    assert "2,366,134 tokens" in up  # plan says 2,394,770 (1.012)
    assert "prefix-cache hit 75%" in (S14 / "firstmove.txt").read_text()


def test_plan_predicts_the_first_moves_kv_cache_as_vllm_sized_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Align-mode prefix caching (2 mamba blocks a group): vLLM 0.22 sized 2,366,134 tokens (s14/up.txt)."""
    flags = ["--max-model-len", "7424", "--enable-prefix-caching", "--max-num-batched-tokens", "8448",
             "--load-format", "dummy", "--language-model-only"]  # fmt: skip
    opts = ["--machine", "h200", "--vllm-version", "0.22.0", "--json"]
    argv = ["plan", "Qwen3.6-35B-A3B-FP8", *opts, "--", *flags]
    code, out, _ = run_cli(argv, capsys)
    mem = json.loads(out)["memory"]
    assert code == 0 and mem["layout"]["block_size"] == 1056
    assert abs(mem["capacity"]["kv_cache_tokens"] / 2_366_134 - 1) < 0.02


S15 = H200 / "s15"


def test_session_15_one_run_tuned_beats_defaults_and_seed000_with_runs_apart() -> None:
    """#24's acceptance, in one tune run on one machine (s15/): vLLM's defaults, seed 000 and the tune's
    first move, three runs each; goodput recomputed per request from the kept bench files."""
    from llmdeck.tune.trials import read_trials

    header, recs = read_trials(S15 / "trials.jsonl")
    assert [(r.origin, r.status, r.metrics.runs) for r in recs] == [  # type: ignore[union-attr]
        ("default", "ok", 3), ("given", "ok", 3), ("search", "ok", 3)
    ]  # fmt: skip
    runs = {r.number: _vllm_goodput_runs(S15 / "bench" / f"trial-{r.number:03d}.json.gz") for r in recs}
    for r in recs:
        assert np.allclose(runs[r.number], r.metrics.goodput_runs, rtol=1e-9)  # type: ignore[union-attr]
    score = {r.number: r.score for r in recs}
    assert round(score[3] / score[1], 2) == 1.66 and round(score[3] / score[2], 1) == 21.4
    assert min(runs[3]) > max(runs[1]) > max(runs[2])  # apart, not just better medians
    assert [r.meets_slo for r in recs] == [False, False, True]
    # one run: one trials file, one machine, the three trials back to back within 20 minutes
    assert len({r.started_at for r in recs}) == 3
    span = (recs[2].started_at - recs[0].started_at).total_seconds()
    assert 0 < span < 20 * 60 and header.created_at <= recs[0].started_at
    assert header.environment["host"]["gpus"] == ["NVIDIA H200"]
    assert header.environment["packages"]["vllm"] == "0.22.0"
    assert recs[2].params == {
        "max-num-seqs": 1024, "max-num-batched-tokens": 8448, "enable-prefix-caching": True,
        "gpu-memory-utilization": 0.92, "async-scheduling": True, "kv-cache-dtype": "auto",
        "max-cudagraph-capture-size": "default",
    }  # fmt: skip


def test_session_15_spec_logs_and_tune_json_agree() -> None:
    spec = json.loads((S15 / "spec.json").read_text())
    trial3 = json.loads((S15 / "trials.jsonl").read_text().splitlines()[3])
    assert spec["vllm_args"] == trial3["args"]
    assert spec["env"] == {"TRITON_CACHE_AUTOTUNING": "1", "VLLM_USE_DEEP_GEMM": "0"}
    tune = json.loads((S15 / "tune.json").read_text())
    assert tune["best"]["number"] == 3 and tune["stopped_by"] == "budget"
    assert tune["noise"]["within_noise"] is False
    logs = {n: (S15 / "logs" / f"trial-{n:03d}.log").read_text() for n in (1, 2, 3)}
    assert "enable_prefix_caching=False" in logs[1] and "enable_prefix_caching=True" in logs[3]
    hits = [float(x) for x in re.findall(r"Prefix cache hit rate: ([0-9.]+)%", logs[3])]
    assert max(hits) > 60
    kv = {n: re.search(r"GPU KV cache size: ([0-9,]+) tokens", log).group(1) for n, log in logs.items()}  # type: ignore[union-attr]
    assert kv == {1: "3,011,444", 2: "7,983,994", 3: "2,366,134"}  # trial 3: as session 14's, plan 1.012
    for log in logs.values():
        assert "CutlassFp8BlockScaledMMKernel" in log and "Using TRITON Fp8 MoE backend" in log


def test_session_15_page_shows_each_run_and_what_the_tune_changed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The page people look at: per-run goodputs side by side, and the winner named by what it changed
    from vLLM's defaults (the sampler sets every dimension; four of seven are vLLM's own values)."""
    code, out, _ = run_cli(["report", str(S15)], capsys)
    assert code == 0 and "chosen: trial 3 (search)" in out
    assert "4.63 3.77 3.83" in out and "6.35 6.47 6.01" in out  # the terminal's trials table
    assert "  3: max-num-batched-tokens=8448, enable-prefix-caching=True (at vLLM's defaults:" in out
    code, _, _ = run_cli(["report", str(S15), "--html", str(tmp_path / "t.html")], capsys)
    page = (tmp_path / "t.html").read_text()
    assert code == 0
    assert "4.63 · 3.77 · 3.83" in page and "6.35 · 6.47 · 6.01" in page
    assert "max-num-batched-tokens=8448, enable-prefix-caching=True<br>" in page
    assert "at vLLM's defaults: max-num-seqs, gpu-memory-utilization" in page
    assert "whisker: min..max" in page
