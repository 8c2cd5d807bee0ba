"""`llmdeck tune`'s parts without an engine: SLO and budget parsing, the search space, pruning through
plan (the hybrid block-size coupling included), the trials file and resume, the choice of the winner,
the HTML page. The end-to-end search on the real CPU engine is tests/integration/test_tune_integration.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import UsageError
from llmdeck.tune.schema import Dimension, TrialMetrics, TrialRecord, TrialsHeader, TuneRequest
from llmdeck.tune.slo import goodput_limits_ms, parse_budget_s, parse_slo_targets
from llmdeck.tune.workload import check_workload, load_shape
from repo_paths import ROOT

# ---- SLO, budget, workload ---------------------------------------------------------------------


def test_slo_targets_parse_with_units_and_give_vllm_goodput_limits() -> None:
    targets = parse_slo_targets("ttft_p99=2s,tpot_p99=100ms itl_mean=0.05 e2el_median=1m")
    assert [(t.key, t.limit_ms) for t in targets] == [
        ("ttft_p99", 2000.0),
        ("tpot_p99", 100.0),
        ("itl_mean", 50.0),
        ("e2el_median", 60000.0),
    ]
    # ITL is per token: not one of vLLM's per-request goodput limits
    assert goodput_limits_ms(targets) == {"ttft": 2000.0, "tpot": 100.0, "e2el": 60000.0}
    assert goodput_limits_ms(parse_slo_targets("ttft_p99=2s,ttft_mean=500ms")) == {"ttft": 500.0}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ttft=2s",
        "ttft_p99",
        "ttft_p99=fast",
        "ttft_p99=-2s",
        "ttft_p99=0",
        "queue_p99=1s",
        "ttft_p200=1s",
        "ttft_p99=1s,ttft_p99=2s",
        "ttft_p99=infs",
    ],
)
def test_bad_slo_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_slo_targets(text)
    assert info.value.exit_code == 2
    assert "ttft_p99=2s" in info.value.render()  # says what to write


def test_budget_durations() -> None:
    assert parse_budget_s("45m") == 2700
    assert parse_budget_s("1h30m") == 5400
    assert parse_budget_s("90s") == 90
    assert parse_budget_s("600") == 600
    assert parse_budget_s(" 2h ") == 7200
    for bad in ("5y", "0m", "-1", "m", "1h 30x", "nan", ""):
        with pytest.raises(UsageError):
            parse_budget_s(bad)


def test_workload_names_and_prompt_file(tmp_path: Path) -> None:
    assert check_workload("agent", None) == "agent"
    p = tmp_path / "p.jsonl"
    p.write_text('{"prompt": "hi"}\n')
    assert check_workload(None, p) == "prompts"
    for name, prompts in (("agnt", None), (None, None), ("agent", p), (None, tmp_path / "missing.jsonl")):
        with pytest.raises(UsageError):
            check_workload(name, prompts)
    shape = load_shape("agent", concurrency=3, input_len=None)
    assert (shape.concurrency, shape.input_len, shape.prefix_len, shape.warmup) == (3, 512, 4096, 3)
    assert shape.num_turns == 4


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--workload", "agent", "--slo", "ttft=2"], "is not an SLO target"),
        (["--workload", "agnt", "--slo", "ttft_p99=2s"], "is not a tune workload"),
        (["--workload", "agent", "--slo", "ttft_p99=2s", "--budget", "forever"], "is not a duration"),
        (["--workload", "agent"], "--slo is required"),
        (["-w", "agent", "--slo", "ttft_p99=2s", "--candidate", "max-num-seqs 8"], "holds no vLLM flags"),
        (["-w", "agent", "--slo", "ttft_p99=2s", "--candidate", "--x 'open"], "is not a flag list"),
        (["-w", "agent", "--slo", "ttft_p99=2s", "--deep-gemm-warmup", "now"], "is not a choice"),
        (["-w", "agent", "--slo", "ttft_p99=2s", "--ready-timeout", "inf"], "not allowed"),
        (["-w", "agent", "--slo", "ttft_p99=2s", "--trials", "0"], "--trials"),
        (["-w", "agent", "--slo", "ttft_p99=2s", "--engine", "gpu"], "Unknown engine"),
        (["--prompts", "/nonexistent.jsonl", "--slo", "ttft_p99=2s"], "is not a file"),
        (["-w", "long-context", "--slo", "ttft_p99=2s", "-c", "0"], "-c"),
    ],
)
def test_cli_bad_input_exits_2_with_one_paragraph(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["tune", "some-model", *args], capsys)
    assert code == 2
    assert says in err and "Traceback" not in err and out == ""
    assert err.count("\n") <= 4  # one paragraph (click usage errors: its usage line above it)


# ---- the search space and pruning through plan -------------------------------------------------


def _req(model: str, engine: str = "venv", args: list[str] | None = None, **kw: object) -> TuneRequest:
    base = LaunchSpec(name="tuned", engine=engine, model=model, vllm_args=args or [])  # type: ignore[arg-type]
    values: dict[str, object] = {
        "base": base,
        "model_ref": model,
        "workload": "agent",
        "load": load_shape("agent", concurrency=16),
        "slo": parse_slo_targets("ttft_p99=2s,tpot_p99=100ms"),
        "budget_s": 600,
        "trials": 3,
    }
    values.update(kw)
    return TuneRequest.model_validate(values)


def test_agent_workload_is_sessions_behind_one_shared_system_prompt() -> None:
    """Issue 24's agent traffic: bench's agent-sessions workload, the system prompt, turns and
    concurrency from the options (chat: the sessions send the whole conversation)."""
    from llmdeck.tune.workload import scenarios_of

    req = _req("Qwen3-0.6B", load=load_shape("agent", concurrency=16, prefix_len=4096, num_turns=3))
    [spec] = scenarios_of(req, "http://127.0.0.1:1", None)
    assert (spec.workload, spec.endpoint, spec.prefix_len, spec.num_turns) == (
        "agent-sessions",
        "chat",
        4096,
        3,
    )
    assert spec.max_concurrency == 16 and spec.num_prompts == 64
    mu = _req("Qwen3-0.6B", workload="multi-user", load=load_shape("multi-user", concurrency=4))
    [spec] = scenarios_of(mu, "http://127.0.0.1:1", None)
    assert (spec.workload, spec.prefix_len) == ("multi-turn", 0)


def test_gpu_space_on_gb10_for_the_hybrid_model() -> None:
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.search import prepare

    req = _req("Qwen3.6-35B-A3B-FP8", machine="dgx-spark", vllm_version="0.22.0")
    header, base_args = prepare(req, Pruner(req))
    dims = {d.name: d.values for d in header.space}
    assert set(dims) == {
        "max-num-seqs",
        "max-num-batched-tokens",
        "enable-prefix-caching",
        "gpu-memory-utilization",
        "async-scheduling",
        "kv-cache-dtype",
        "max-cudagraph-capture-size",
    }
    assert max(dims["gpu-memory-utilization"]) <= 0.85  # GB10's ceiling
    assert 16 in dims["max-num-seqs"]
    # the attention block size (per KV dtype) and its multiples are in the batched-tokens axis
    assert {2096, 4192, 8384} <= set(dims["max-num-batched-tokens"])  # type: ignore[arg-type]
    # --max-model-len only as long as the workload needs: the 4096-token system prompt, then 4 turns of
    # 512 in + 256 out (16 tokens of chat template each, and the prompt's) = 7248 -> 7424 (to 256s)
    assert base_args == ["--max-model-len", "7424"]
    assert any("speculative decoding" in n for n in header.notes)


def test_flags_fixed_in_the_base_are_not_searched() -> None:
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.search import prepare

    req = _req("Qwen3-0.6B", machine="h200", args=["--max-num-seqs", "8", "--enforce-eager"])
    header, _ = prepare(req, Pruner(req))
    names = {d.name for d in header.space}
    assert "max-num-seqs" not in names
    assert "max-cudagraph-capture-size" not in names  # eager: no CUDA graphs to size
    assert max(next(d.values for d in header.space if d.name == "gpu-memory-utilization")) == 0.92  # type: ignore[type-var]


def test_plan_rejects_the_hybrid_block_size_coupling() -> None:
    """vLLM 0.22 asserts block_size (2096 with fp8 KV) <= max_num_batched_tokens with prefix caching
    on: plan's rule rejects 2048; a multiple of the block, or prefix caching off, may start."""
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.space import with_model_len

    req = _req("Qwen3.6-35B-A3B-FP8", machine="dgx-spark", vllm_version="0.22.0")
    pruner = Pruner(req)
    base = with_model_len([], 8192)
    bad = {"kv-cache-dtype": "fp8", "enable-prefix-caching": True, "max-num-batched-tokens": 2048}
    reasons = pruner.reasons(bad, base)
    assert reasons and reasons[0].startswith("hybrid-block-size-exceeds-batched-tokens")
    assert "2096" in reasons[0] and "Fix:" in reasons[0]
    assert pruner.reasons({**bad, "max-num-batched-tokens": 4192}, base) == []
    assert pruner.reasons({**bad, "enable-prefix-caching": False}, base) == []
    over = pruner.reasons({"gpu-memory-utilization": 0.9}, base)
    assert over and "gb10" in over[0]
    # what starts is what plan planned: vLLM's defaults on GB10 get plan's 0.85 (its 0.9 does not boot)
    assert pruner.check({}, base) == ([], [*base, "--gpu-memory-utilization", "0.85"])
    # a flag plan refuses is that candidate's rejection (the tune goes on), not the tune's exit 2
    (zero,) = pruner.reasons({"max-num-seqs": 0}, base)
    assert zero.startswith("flags: --max-num-seqs 0 is out of range") and "Fix:" in zero
    few = pruner.reasons({"max-num-seqs": 512, "max-num-batched-tokens": 256}, base)
    assert few and few[-1].startswith("scheduler-batched-tokens-below-seqs")


def test_candidate_flags_merge_over_the_base() -> None:
    from llmdeck.tune.space import candidate_flags

    args, env = candidate_flags(
        ["--max-model-len", "4096", "--max-num-seqs", "4"],
        {
            "max-num-seqs": 32,
            "enable-prefix-caching": False,
            "max-cudagraph-capture-size": "max-num-seqs",
            "VLLM_CPU_KVCACHE_SPACE": 2,
        },
    )
    assert args == [
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "32",
        "--no-enable-prefix-caching",
        "--compilation-config",
        '{"max_cudagraph_capture_size": 32}',
    ]
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "2"}


def test_a_rejected_trial_starts_nothing(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llmdeck.settings import Settings
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.trial import run_trial

    req = _req(str(tiny_model_dir), engine="cpu")
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    events: list[object] = []
    rec = run_trial(
        req,
        1,
        {"VLLM_CPU_KVCACHE_SPACE": 1},
        "search",
        base_args=["--max-model-len", "100000"],
        pruner=Pruner(req),
        settings=settings,
        out_dir=tmp_path,
        events=events.append,
    )
    assert rec.status == "rejected" and "max-model-len-beyond-position-embeddings" in rec.reason
    assert rec.startup_s is None and events == []
    assert not (tmp_path / "state").exists()  # no server record, no log: nothing was started


# ---- the trials file and resume ----------------------------------------------------------------


def _header(req: TuneRequest) -> TrialsHeader:
    from llmdeck.tune.schema import Dimension

    space = [
        Dimension(name="max-num-seqs", values=[1, 2, 4]),
        Dimension(name="enable-prefix-caching", values=[True, False]),
    ]
    return TrialsHeader(fingerprint=req.fingerprint(), request=req, space=space)


def _trial(n: int, params: dict[str, object], goodput: float = 1.0, origin: str = "search") -> TrialRecord:
    m = TrialMetrics(
        goodput=goodput,
        request_throughput=goodput,
        output_throughput=10 * goodput,
        completed=8,
        failed=0,
        slo_values_ms={"ttft_p99": 100.0 / goodput, "tpot_p99": 5.0},
    )
    return TrialRecord.model_validate(
        {"number": n, "params": params, "origin": origin, "status": "ok", "metrics": m, "meets_slo": True}
    )


def test_trials_file_appends_whole_lines_and_resumes(tmp_path: Path) -> None:
    from llmdeck.tune.trials import TRIALS_NAME, append_trial, open_out_dir, read_trials

    req = _req("Qwen3-0.6B")
    out = tmp_path / "tune"
    _, done = open_out_dir(out, _header(req), resume=False)
    assert done == []
    path = out / TRIALS_NAME
    append_trial(path, _trial(1, {}, origin="default"))
    append_trial(path, _trial(2, {"max-num-seqs": 2, "enable-prefix-caching": True}))
    with open(path, "a") as fh:  # a crash in the middle of a write: a torn last line
        fh.write('{"kind": "llmdeck.tune.trial", "number": 3, "par')
    _, back = read_trials(path)
    assert [r.number for r in back] == [1, 2]
    # a new run into the same folder resumes (compatible header) ...
    _, again = open_out_dir(out, _header(_req("Qwen3-0.6B", budget_s=30, trials=9)), resume=True)
    assert [r.number for r in again] == [1, 2]
    # ... and its next trial stays a whole line after the torn one
    append_trial(path, _trial(3, {"max-num-seqs": 4, "enable-prefix-caching": False}))
    _, back = read_trials(path)
    assert [r.number for r in back] == [1, 2, 3]


def test_an_incompatible_or_foreign_folder_is_refused(tmp_path: Path) -> None:
    from llmdeck.tune.trials import append_trial, open_out_dir

    out = tmp_path / "tune"
    open_out_dir(out, _header(_req("Qwen3-0.6B")), resume=False)
    other = _req("Qwen3-0.6B", slo=parse_slo_targets("ttft_p99=1s"))
    # a folder holding only another tune's header (no trial measured) is taken over: nothing is lost
    header, done = open_out_dir(out, _header(other), resume=False)
    assert done == [] and header.fingerprint == other.fingerprint()
    open_out_dir(out, _header(_req("Qwen3-0.6B")), resume=False)
    append_trial(out / "trials.jsonl", _trial(1, {"max-num-seqs": 4}))
    with pytest.raises(UsageError, match="another tune") as info:
        open_out_dir(out, _header(other), resume=False)
    assert info.value.exit_code == 2
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="other files"):
        open_out_dir(mine, _header(other), resume=False)
    assert (mine / "notes.txt").read_text() == "mine"
    with pytest.raises(UsageError, match="--resume"):
        open_out_dir(tmp_path / "empty", _header(other), resume=True)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "trials.jsonl").write_text('{"kind": "something-else"}\n')
    with pytest.raises(UsageError, match=r"not a llmdeck\.tune\.trials header \(kind 'something-else'\)"):
        open_out_dir(bad, _header(other), resume=False)


@pytest.mark.parametrize(("version", "shown"), [(True, "true"), ("1", '"1"'), (None, "null")])
def test_a_trials_header_whose_version_is_no_integer_is_refused_as_such(
    tmp_path: Path, version: object, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`"schema_version": true` had been read as version 1, and "1" or null had been told to upgrade
    llmdeck ("has schema_version '1'; this llmdeck reads version 1")."""
    out = tmp_path / "tune"
    out.mkdir()
    header = _header(_req("Qwen3-0.6B")).model_dump(mode="json") | {"schema_version": version}
    (out / "trials.jsonl").write_text(json.dumps(header) + "\n")
    code, _, err = run_cli(["report", str(out)], capsys)
    assert code == 2 and f"schema_version is {shown}, not an integer" in err and "Upgrade" not in err


def test_resume_runs_only_what_is_left() -> None:
    from llmdeck.tune.search import Search, _queue
    from llmdeck.tune.space import params_key

    req = _req("Qwen3-0.6B", candidates=[["--max-num-seqs", "8"]])
    header = _header(req)
    done = [_trial(1, {}, origin="default"), _trial(2, {"max-num-seqs": 2, "enable-prefix-caching": True})]
    assert _queue(req, done, baseline=True) == [("given", {"max-num-seqs": "8"})]
    search = Search(header.space, 0, done)
    assert len(search.study.trials) == 1  # the search trial told to the sampler again
    seen = {params_key(done[1].params)}
    for _ in range(5):  # every proposal is new, until the 6 configs are spent
        params = search.propose()
        assert params is not None and params_key(params) not in seen
        seen.add(params_key(params))
        search.tell(params, 0.5)
    assert search.propose() is None


# ---- the winner and the page -------------------------------------------------------------------


def test_winner_meets_the_slos_first_and_the_front_and_page() -> None:
    from llmdeck.tune.html import pareto_front, render_tune_html
    from llmdeck.tune.outputs import best_trial, what_mattered

    a = _trial(1, {}, 2.0, origin="default")
    b = _trial(2, {"max-num-seqs": 4, "enable-prefix-caching": True}, 3.0)
    b.meets_slo = False
    c = _trial(3, {"max-num-seqs": 2, "enable-prefix-caching": False}, 2.5)
    rejected = TrialRecord(number=4, params={"max-num-seqs": 1}, status="rejected", reason="plan: no")
    assert best_trial([a, b, c, rejected]) is c
    assert best_trial([b]) is b  # none meets: the best goodput, flagged by meets_slo
    assert best_trial([rejected]) is None
    assert pareto_front([(1, 10.0, 5.0), (2, 20.0, 9.0), (3, 30.0, 8.0), (4, 10.0, 4.0)]) == {1, 2}
    effects = what_mattered([a, b, c], ["max-num-seqs", "enable-prefix-caching"])
    assert effects[0].means == {"default": 2.0, "4": 3.0, "2": 2.5}
    req = _req("Qwen3-0.6B")
    html = render_tune_html(_header(req), [a, b, c, rejected], c)
    assert "Pareto" in html and "<script" not in html and "plan: no" in html
    assert "1.25" in html  # trial 3's goodput against vLLM's defaults


def test_trials_header_records_the_environment_as_json(tmp_path: Path) -> None:
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.search import environment

    req = _req("Qwen3-0.6B", machine="h200")
    env = environment(req, Pruner(req))
    assert env["engine"] == "venv" and "optuna" in env["packages"] and env["deep_gemm_warmup"] == "relax"
    json.dumps(env)


def test_a_start_that_fails_is_recorded_and_the_search_goes_on(tmp_path: Path, tiny_model_dir: Path) -> None:
    """A real start whose engine exits at once (the venv engine's Python exits 1 when it is to serve):
    each trial is recorded `failed` with the service's diagnosis, the next one still runs, and no
    spec is written for a tune that measured nothing."""
    from llmdeck.settings import Settings
    from llmdeck.tune.search import run_tune

    # a "Python" that passes preflight's `import vllm` and exits 1 when asked to serve: the engine dies
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\ncase "$1" in -c) echo 0.22.0; exit 0;; esac\necho boom >&2\nexit 1\n')
    python.chmod(0o755)
    base = LaunchSpec(name="tuned", engine="venv", model=str(tiny_model_dir), python=str(python))
    req = _req(str(tiny_model_dir), machine="h200", trials=2, ready_timeout_s=60).model_copy(
        update={"base": base}
    )
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    events: list[object] = []
    result = run_tune(req, settings, tmp_path / "out", events.append)
    assert [t.status for t in result.trials] == ["failed", "failed"]
    assert all(t.reason for t in result.trials)
    assert result.best is None and result.spec_file is None
    assert (tmp_path / "out" / "trials.jsonl").read_text().count('"status":"failed"') == 2


def test_an_api_key_never_reaches_the_trials_file(tmp_path: Path) -> None:
    from llmdeck.settings import Settings
    from llmdeck.tune.request import make_request
    from llmdeck.tune.trial import trial_spec

    req = make_request(
        Settings(state_dir=tmp_path / "s", cache_dir=tmp_path / "c"),
        model="Qwen3-0.6B", spec_file=None, workload="agent", prompts=None, slo="ttft_p99=2s",
        budget="10m", trials=2, extra_args=["--api-key", "sk-secret-123", "--max-num-seqs", "4"],
        spec_overrides={"engine": "venv"}, load={}, options={"machine": "h200"},
    )  # fmt: skip
    assert "sk-secret-123" not in req.model_dump_json() and "--max-num-seqs" in req.base.vllm_args
    assert trial_spec(req, req.base.vllm_args, {}).env["VLLM_API_KEY"] == "sk-secret-123"


def test_tune_help_lists_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["tune", "--help"], capsys)
    assert code == 0 and "--slo" in out and "Speculative" in out
    examples = [line for line in out.splitlines() if line.lstrip().startswith("llmdeck tune")]
    assert len(examples) >= 4 and all(line.startswith("   llmdeck") for line in examples)


def test_the_committed_cpu_evidence_reads_back() -> None:
    """evidence/tune/cpu (a real run on vllm-cpu): its trials file is one this llmdeck reads, and
    spec.json is the trial the rules pick."""
    from llmdeck.engines.spec import read_spec_file
    from llmdeck.tune.outputs import best_trial
    from llmdeck.tune.trials import read_trials

    cpu = ROOT / "evidence" / "tune" / "cpu"
    header, trials = read_trials(cpu / "trials.jsonl")
    assert header.request.base.engine == "cpu" and len(trials) == 6
    assert all(t.status == "ok" and t.metrics and t.metrics.completed == 16 for t in trials)
    best = best_trial(trials)
    assert best is not None and read_spec_file(cpu / "spec.json").vllm_args == best.args
    assert [t.origin for t in trials[:2]] == ["default", "given"]


def test_cli_refuses_an_out_folder_of_another_tune_before_starting_anything(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.engines.spec import write_spec_file
    from llmdeck.tune.trials import open_out_dir

    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    out = tmp_path / "tune"
    from llmdeck.tune.trials import append_trial

    open_out_dir(out, _header(_req(str(tiny_model_dir), engine="cpu")), resume=False)
    append_trial(out / "trials.jsonl", _trial(1, {"max-num-seqs": 4}))  # a measured trial: not to mix
    spec = tmp_path / "spec.json"
    write_spec_file(spec, LaunchSpec(name="mine", engine="cpu", model=str(tiny_model_dir), port=8123))
    args = ["tune", "--spec", str(spec), "-w", "multi-user", "--slo", "ttft_p99=2s", "--out", str(out)]
    code, out_text, err = run_cli(args, capsys)
    assert code == 2 and "holds the trials of another tune" in err and "multi-user" in err
    state = tmp_path / "state"  # nothing was started (state/locks/ holds the tune's lock on its folder)
    assert out_text == "" and not (state / "servers").exists() and not (state / "logs").exists()


def test_confirm_reruns_the_leaders_and_the_defaults_and_the_median_decides() -> None:
    from llmdeck.tune.outputs import best_trial
    from llmdeck.tune.search import confirm_queue

    d = _trial(1, {}, 2.0, origin="default")
    a = _trial(2, {"max-num-seqs": 4, "enable-prefix-caching": True}, 3.0)  # lucky once
    b = _trial(3, {"max-num-seqs": 2, "enable-prefix-caching": False}, 2.8)
    c = _trial(4, {"max-num-seqs": 1, "enable-prefix-caching": False}, 1.0)
    records = [d, a, b, c]
    assert best_trial(records) is a
    assert [r.number for r in confirm_queue(records, 2)] == [2, 3, 1]  # the two leaders, then defaults
    assert confirm_queue(records, 0) == []
    a2 = _trial(5, a.params, 1.5, origin="confirm")
    a2.repeat_of = 2
    b2 = _trial(6, b.params, 2.7, origin="confirm")
    b2.repeat_of = 3
    records += [a2, b2]
    assert best_trial(records) is b  # medians: a 2.25, b 2.75
    assert [r.number for r in confirm_queue(records, 2)] == [1]  # a resumed tune re-runs each once
    b2.meets_slo = False
    assert best_trial(records) is a  # a config must meet the SLOs in every run
    from llmdeck.tune.html import render_tune_html

    b2.meets_slo = True
    html = render_tune_html(_header(_req("Qwen3-0.6B")), records, best_trial(records))
    assert "the pick is by the median" in html and "2.800, 2.700" in html


def test_deep_gemm_choice_reaches_each_trial_start() -> None:
    """relax/skip/full set VLLM_DEEP_GEMM_WARMUP; off turns DeepGEMM off (VLLM_USE_DEEP_GEMM=0) so a
    block-FP8 shape starts without its > 15 min JIT warmup; the CPU engine gets neither."""
    from llmdeck.tune.trial import trial_spec

    relax = trial_spec(_req("Qwen3-0.6B"), [], {}).env
    assert relax["VLLM_DEEP_GEMM_WARMUP"] == "relax" and "VLLM_USE_DEEP_GEMM" not in relax
    off = trial_spec(_req("Qwen3-0.6B", deep_gemm_warmup="off"), [], {}).env
    assert off["VLLM_USE_DEEP_GEMM"] == "0" and "VLLM_DEEP_GEMM_WARMUP" not in off
    cpu = trial_spec(_req("Qwen3-0.6B", engine="cpu"), [], {}).env
    assert not {"VLLM_USE_DEEP_GEMM", "VLLM_DEEP_GEMM_WARMUP"} & set(cpu)


def _moves(model: str, **kw: object) -> tuple[list[tuple[dict[str, object], str]], object, list[str]]:
    from llmdeck.tune.moves import first_moves
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.search import prepare

    req = _req(model, machine="h200", **kw)
    pruner = Pruner(req)
    header, base_args = prepare(req, pruner)
    return first_moves(req, pruner, base_args, header.space), pruner, base_args  # type: ignore[return-value]


def test_first_move_turns_prefix_caching_on_where_vllm_022_leaves_it_off_on_a_hybrid() -> None:
    """The H200 tune's lesson: vLLM 0.22's defaults serve the hybrid without prefix caching (its log:
    enable_prefix_caching=False, hit rate 0%) while agent sessions repeat ~50% of their tokens; the first
    move is the defaults with it on and a chunk of whole attention blocks (1056 for the bf16 KV cache),
    and plan accepts it."""
    moves, pruner, base_args = _moves("Qwen3.6-35B-A3B-FP8", vllm_version="0.22.0")
    assert len(moves) == 1
    params, why = moves[0]
    assert params["enable-prefix-caching"] is True and params["max-num-batched-tokens"] == 8448
    assert params["max-num-seqs"] == 1024 and params["gpu-memory-utilization"] == 0.92  # vLLM 0.22 default
    assert params["kv-cache-dtype"] == "auto" and params["async-scheduling"] is True
    assert "prefix" in why and "1056" in why
    assert pruner.reasons(params, base_args) == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("model", "kw"),
    [
        ("Qwen3.6-35B-A3B-FP8", {"vllm_version": "0.28.0"}),  # prefix caching default-on for hybrids
        ("Qwen3-0.6B", {"vllm_version": "0.22.0"}),  # not a hybrid: on by default already
        ("Qwen3.6-35B-A3B-FP8", {"vllm_version": "0.22.0", "workload": "long-context"}),  # no shared prefix
        # Nemotron-H on vLLM < 0.28: prefix caching would be the 'all' Mamba mode (results-round2 row 9:
        # 65.85x instead of 273x), not the align-mode move this is
        pytest.param(
            str(ROOT / "evidence/plan/families/configs/nemotron-3-nano-30b-a3b"),
            {"vllm_version": "0.22.0"},
            id="nemotron-3-nano-vllm-0.22",
        ),
    ],
)
def test_no_first_move_where_prefix_caching_is_on_or_useless(model: str, kw: dict[str, object]) -> None:
    assert _moves(model, **kw)[0] == []


def test_the_sampler_proposes_the_first_move_first_and_skips_it_once_run() -> None:
    from llmdeck.tune.search import Search

    dims = [Dimension(name="a", values=[1, 2, 3]), Dimension(name="b", values=[True, False])]
    move = {"a": 3, "b": False}
    assert Search(dims, 0, [], [move]).propose() == move
    ran = TrialRecord(number=2, params=move, origin="search", args=[], env={}, status="ok")
    assert Search(dims, 0, [ran], [move]).propose() != move


def test_the_winning_spec_keeps_the_engine_variables_its_trial_ran_with() -> None:
    """A spec for `up --spec` must start what was measured: with --deep-gemm-warmup off that is
    VLLM_USE_DEEP_GEMM=0 (the session-13 H200 spec.json had an empty env)."""
    from llmdeck.tune.outputs import winning_spec

    req = _req("Qwen3-0.6B", deep_gemm_warmup="off")
    best = TrialRecord(
        number=1, params={}, origin="default", args=["--max-num-seqs", "16"], env={}, status="ok"
    )
    env = winning_spec(req, best).env  # type: ignore[attr-defined]
    assert env["VLLM_USE_DEEP_GEMM"] == "0" and env["TRITON_CACHE_AUTOTUNING"] == "1"


def test_what_mattered_counts_a_flag_left_to_vllm_at_vllms_own_value() -> None:
    """On the H200 run the prefix-caching row read "default 4.38 · True 1.67": with plan's defaults
    (off for the hybrid on vLLM 0.22) the trials that left it alone count as False (default)."""
    from llmdeck.tune.outputs import what_mattered

    a = _trial(1, {}, 4.4, origin="default")
    b = _trial(2, {"enable-prefix-caching": True}, 1.7)
    c = _trial(3, {"enable-prefix-caching": False}, 4.0)
    effects = what_mattered([a, b, c], ["enable-prefix-caching"], {"enable-prefix-caching": False})
    assert effects[0].means == pytest.approx({"False (default)": 4.2, "True": 1.7})
    assert what_mattered([a, b], ["enable-prefix-caching"])[0].means == {"default": 4.4, "True": 1.7}


def test_the_header_records_vllms_defaults_on_each_axis() -> None:
    from llmdeck.tune.prune import Pruner
    from llmdeck.tune.search import prepare

    req = _req("Qwen3.6-35B-A3B-FP8", machine="h200", vllm_version="0.22.0")
    header, _ = prepare(req, Pruner(req))
    assert header.defaults["enable-prefix-caching"] is False
    assert header.defaults["max-num-batched-tokens"] == 8192 and header.defaults["max-num-seqs"] == 1024
    assert set(header.defaults) == {d.name for d in header.space}


def test_a_docker_tune_gives_every_trial_one_compile_cache(tmp_path: Path) -> None:
    """Docker containers start fresh: without a mounted cache each trial would compile cold."""
    from llmdeck.settings import Settings
    from llmdeck.tune.request import make_request

    settings = Settings(state_dir=tmp_path / "s", cache_dir=tmp_path / "c")
    req = make_request(
        settings, model="Qwen3-0.6B", spec_file=None, workload="agent", prompts=None, slo="ttft_p99=2s",
        budget="10m", trials=2, extra_args=[], spec_overrides={"engine": "docker"}, load={},
        options={"machine": "h200"},
    )  # fmt: skip
    assert req.base.compile_cache == str(tmp_path / "c" / "engine" / "docker-compile")


def test_where_a_start_went_from_real_engine_logs() -> None:
    """The H200 trial logs (vLLM 0.22.0, compiled, CUDA graphs) and a vllm-cpu one (eager): the
    segments add up to launch -> API up, and the page shows them."""
    from llmdeck.tune.html import render_tune_html
    from llmdeck.tune.startcost import describe, start_phases

    root = ROOT / "evidence" / "tune"
    gpu = start_phases((root / "h200" / "logs" / "trial-001.log").read_text())
    assert gpu == {
        "launch": 59.0, "weights": 8.0, "compile": 80.0, "profiling + KV cache": 111.0,
        "CUDA graphs": 38.0, "API": 3.0,
    }  # fmt: skip
    assert describe(gpu) == "profiling + KV cache 111 s, compile 80 s, launch 59 s"
    cpu = start_phases((root / "cpu" / "logs" / "trial-001.log").read_text())
    assert "compile" not in cpu and "CUDA graphs" not in cpu and cpu["weights"] > 0
    assert start_phases("no vLLM here\n") == {}
    rec = _trial(1, {}, 2.0, origin="default")
    rec.startup_s, rec.bench_s, rec.start_phases = 333.4, 49.1, gpu
    html = render_tune_html(_header(_req("Qwen3-0.6B")), [rec], rec)
    assert "Where the time went" in html and "profiling + KV cache" in html and ">333<" in html


def test_page_names_a_trial_by_what_it_changed_from_vllms_defaults() -> None:
    """A sampler's trial sets every dimension; the page leads with the flags away from vLLM's own
    values and names the rest, and a trial of only vLLM's values says so."""
    from llmdeck.tune.html import _label

    defaults = {"max-num-seqs": 1024, "enable-prefix-caching": False}
    rec = _trial(2, {"max-num-seqs": 1024, "enable-prefix-caching": True}, 1.0)
    assert _label(rec, defaults) == ("enable-prefix-caching=True", ["max-num-seqs"])
    same = _trial(3, {"max-num-seqs": 1024}, 1.0)
    assert _label(same, defaults) == ("vLLM's defaults, set explicitly", ["max-num-seqs"])
    assert _label(_trial(1, {}, 1.0, origin="default"), defaults) == ("vLLM's defaults", [])
    assert _label(rec, {}) == ("max-num-seqs=1024, enable-prefix-caching=True", [])


@pytest.mark.parametrize("version", ["banana", "latest", ""])
def test_a_vllm_version_that_is_not_one_is_bad_usage(tmp_path: Path, version: str) -> None:
    """`tune --vllm-version banana` was taken as the version the rules are checked for (plan refused it)."""
    from llmdeck.settings import Settings
    from llmdeck.tune.request import make_request

    with pytest.raises(UsageError, match=f"--vllm-version {version!r} is not a version") as info:
        make_request(
            Settings(state_dir=tmp_path / "s", cache_dir=tmp_path / "c"),
            model="Qwen3-0.6B", spec_file=None, workload="agent", prompts=None, slo="ttft_p99=2s",
            budget="10m", trials=2, extra_args=[], spec_overrides={"engine": "venv"}, load={},
            options={"machine": "h200", "vllm_version": version},
        )  # fmt: skip
    assert info.value.exit_code == 2


def test_an_out_folder_that_cannot_be_made_is_bad_input(tmp_path: Path, tiny_model_dir: Path) -> None:
    """--out under a file (notes.txt/sub) or in /proc had been an internal error (NotADirectoryError)."""
    from llmdeck.errors import UsageError
    from llmdeck.tune.trials import open_out_dir

    (tmp_path / "notes.txt").write_text("mine\n")
    header = _header(_req(str(tiny_model_dir), engine="cpu"))
    for out in (tmp_path / "notes.txt" / "sub", Path("/proc/llmdeck-tune")):
        with pytest.raises(UsageError, match="cannot create the tune's folder there"):
            open_out_dir(out, header, resume=False)


def test_a_config_json_alone_is_refused_before_the_out_folder_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tune config.json` had planned, made --out and its trials header, then failed starting trial 1."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    config = tmp_path / "config.json"
    config.write_text(
        (ROOT / "src/llmdeck/catalog/data/configs/Qwen3-Coder-30B-A3B-Instruct.config.json").read_text()
    )
    out = tmp_path / "tune"
    args = ["tune", str(config), "--engine", "cpu", "-w", "agent", "--slo", "ttft_p99=30s", "--out", str(out)]
    code, _, err = run_cli(args, capsys)
    assert (
        code == 2 and "a config.json alone plans a model but cannot serve it" in err and not out.exists()
    ), err


def test_report_of_a_tune_folder_with_a_broken_trials_file_says_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty or foreign trials.jsonl had been "not a tune folder or trials file, or several were given"."""
    (tmp_path / "trials.jsonl").write_text('{"kind": "llmdeck.bench.result"}\n')
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert (
        code == 2
        and "trials.jsonl:1 is not a llmdeck.tune.trials header (kind 'llmdeck.bench.result')" in err
    )
    (tmp_path / "trials.jsonl").write_text("")
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 2 and "(empty)" in err, err
