"""Bench building blocks: /metrics parsing, verdict rules, suites, workloads, result files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmdeck.bench.monitor import summarize_server
from llmdeck.bench.result_file import load_result
from llmdeck.bench.result_schema import (
    BenchResult,
    HostFacts,
    ScenarioMetrics,
    ScenarioResult,
    ScenarioSpec,
    ServerMetricsSummary,
    Stats,
    TargetInfo,
)
from llmdeck.bench.suites import SUITES, get_suite
from llmdeck.bench.verdict import DEFAULT_SLO, judge, parse_duration_s, parse_slo
from llmdeck.client.prom import parse_metrics
from llmdeck.errors import ResultFileError, UsageError
from llmdeck.util.atomic import atomic_write_json
from repo_paths import ROOT

FIX = ROOT.parent / "shared" / "fixtures" / "vllm-0.22.0-h200"


# ---- /metrics ---------------------------------------------------------------------------------


def test_parse_real_vllm_metrics_and_deltas() -> None:
    before = parse_metrics((FIX / "metrics-qwen3-0.6b-before.txt").read_text(), t=0.0)
    after = parse_metrics((FIX / "metrics-qwen3-0.6b-after.txt").read_text(), t=20.0)
    assert before.engine == "vllm"
    assert after.values["prompt_tokens"] == 10253.0
    assert after.values["generation_tokens"] == 5128.0
    assert after.values["running"] == 0.0 and after.values["kv_usage"] == 0.0
    s = summarize_server([before, after], 1.0)
    assert s.engine == "vllm"
    # the fixture bench sent 20 x 256 output tokens: 5120 generated between the scrapes
    assert s.generation_tokens_per_s == pytest.approx((5128 - 8) / 20.0)
    assert s.prompt_tokens_per_s == pytest.approx((10253 - 13) / 20.0)
    assert s.preemptions == 0.0
    assert s.prefix_cache_hit_rate_pct == 0.0
    assert s.not_reported == []


def test_server_own_ttft_and_itl_from_real_histograms() -> None:
    """Between the fixture scrapes vLLM served the 20 requests of the fixture's `vllm bench serve`
    run: the server's own mean TTFT is 4.2 ms below what vLLM's client measured (HTTP, SSE and the
    client's loop), and its own mean ITL matches the client's to 0.2%."""
    before = parse_metrics((FIX / "metrics-qwen3-0.6b-before.txt").read_text(), t=0.0)
    after = parse_metrics((FIX / "metrics-qwen3-0.6b-after.txt").read_text(), t=20.0)
    s = summarize_server([before, after], 1.0)
    assert s.server_mean_ttft_ms == pytest.approx(1000 * (0.785158634185791 - 0.14227557182312012) / 20)
    assert s.server_mean_itl_ms == pytest.approx(1000 * (13.544875088999902 - 0.015968705000034333) / 5100)
    client = json.loads((FIX / "vllm-bench-serve-random-512in-256out-20req-1rps.json").read_text())
    assert client["mean_ttft_ms"] - s.server_mean_ttft_ms == pytest.approx(4.24, abs=0.01)
    assert s.server_mean_itl_ms == pytest.approx(client["mean_itl_ms"], rel=0.002)
    # one scrape, or histograms that did not move: unknown, not 0
    assert summarize_server([after, after], 1.0).server_mean_ttft_ms is None


def test_server_start_time_from_real_metrics_and_the_age_in_the_table() -> None:
    from datetime import UTC, datetime, timedelta

    from llmdeck.bench.result_schema import BenchResult, HostFacts, TargetInfo
    from llmdeck.bench.tables import summary_table
    from llmdeck.client.prom import process_start_time

    page = (FIX / "metrics-qwen3-0.6b-before.txt").read_text()
    assert process_start_time(page) == pytest.approx(1.79598448995e9)
    assert process_start_time("vllm:num_requests_running 1\n") is None  # not reported: unknown
    for odd in ("1e300", "-5", "0", "inf"):  # 1e300 had crashed bench, compare and eval (OverflowError)
        assert process_start_time(f"process_start_time_seconds {odd}\n") is None
    from llmdeck.client.prom import parse_metrics

    page = "vllm:kv_cache_usage_perc 1e300\nvllm:num_requests_running NaN\nvllm:num_requests_waiting -3\n"
    assert parse_metrics(page).values == {}  # had been shown as a KV cache 1e302 % full
    assert parse_metrics("vllm:kv_cache_usage_perc 0.5\n").values == {"kv_usage": 0.5}
    started = datetime.fromtimestamp(1.79598448995e9, UTC)
    res = BenchResult(
        target=TargetInfo(base_url="http://x", model="m", server_version="0.22.0", server_started_at=started),
        host=HostFacts(hostname="h", platform="p", python="3", cpu_count=1, mem_total_gib=1.0),
        created_at=started + timedelta(minutes=3),
    )
    assert summary_table(res).title.endswith("(server 0.22.0, up 3 min at the start)")
    # the field round-trips through the result file
    assert BenchResult.model_validate_json(res.model_dump_json()).target.server_started_at == started


def test_prefix_cache_hit_rate_from_hybrid_fixture() -> None:
    snap = parse_metrics((FIX / "hybrid-metrics-after-prefix-bench.txt").read_text(), t=10.0)
    zero = parse_metrics("vllm:prefix_cache_queries_total 0\nvllm:prefix_cache_hits_total 0\n", t=0.0)
    s = summarize_server([zero, snap], 1.0)
    assert s.prefix_cache_hit_rate_pct == pytest.approx(100 * 85936 / 191840)


def test_sglang_and_llamacpp_names_and_missing_means_not_reported() -> None:
    sg = parse_metrics(
        'sglang:num_running_reqs{model_name="m"} 3\nsglang:num_queue_reqs 1\nsglang:token_usage 0.5\n'
    )
    assert sg.engine == "sglang" and sg.values == {"running": 3.0, "waiting": 1.0, "kv_usage": 0.5}
    lc = parse_metrics("llamacpp:requests_processing 2\nllamacpp:tokens_predicted_total 100\n")
    assert lc.engine == "llamacpp" and lc.values["generation_tokens"] == 100.0
    s = summarize_server([sg, sg], 1.0)
    assert s.preemptions is None and "preemptions" in s.not_reported  # absent, never 0


def test_llamacpps_prompt_cache_reads_as_vllms_prefix_cache() -> None:
    """A real llama-server page (the llama.cpp llama-cpp-python 0.3.36 vendors, after agent sessions):
    its prompt_tokens_total excludes what the prompt cache served, so hits are the cached tokens and
    queries both; bench then reports llama.cpp's hit rate as it does vLLM's (it said "not reported")."""
    from repo_paths import ROOT

    page = (ROOT / "tests/fixtures/llamacpp/metrics-after-agent-sessions.txt").read_text()
    first = parse_metrics(page, t=0.0)
    assert first.engine == "llamacpp"
    assert first.values["prefix_hits"] == 15600 and first.values["prefix_queries"] == 15600 + 4416
    assert first.values["prompt_tokens"] == 20016  # every prompt token, as vLLM counts them
    later = page.replace("prompt_tokens_total 4416", "prompt_tokens_total 4616").replace(
        "prompt_tokens_cached_total 15600", "prompt_tokens_cached_total 16400"
    )
    s = summarize_server([first, parse_metrics(later, t=1.0)], 1.0)
    assert s.prefix_cache_hit_rate_pct == 80.0 and "prefix_hits" not in s.not_reported


def test_labelled_samples_are_summed_across_engines() -> None:
    text = 'vllm:num_requests_waiting{engine="0"} 2\nvllm:num_requests_waiting{engine="1"} 3\n'
    assert parse_metrics(text).values["waiting"] == 5.0


def test_waiting_that_never_drains_is_detected() -> None:
    snaps = [parse_metrics(f"vllm:num_requests_waiting {w}\n", t=i) for i, w in enumerate([0, 3, 5, 6, 4, 7])]
    assert summarize_server(snaps, 1.0).waiting_never_drained is True
    snaps2 = [
        parse_metrics(f"vllm:num_requests_waiting {w}\n", t=i) for i, w in enumerate([0, 3, 5, 0, 0, 0])
    ]
    assert summarize_server(snaps2, 1.0).waiting_never_drained is False


# ---- verdicts ----------------------------------------------------------------------------------


def _metrics(ttft_p99_ms: float, tpot_mean_ms: float, failed: int = 0) -> ScenarioMetrics:
    def st(mean: float, p99: float) -> Stats:
        return Stats(n=10, mean=mean, median=mean, std=0.0, percentiles={"p50": mean, "p99": p99})

    return ScenarioMetrics(
        completed=10,
        failed=failed,
        duration_s=10.0,
        total_input_tokens=100,
        total_output_tokens=100,
        request_throughput=1.0,
        output_throughput=10.0,
        total_token_throughput=20.0,
        ttft_ms=st(ttft_p99_ms / 2, ttft_p99_ms),
        tpot_ms=st(tpot_mean_ms, tpot_mean_ms),
    )


def test_default_verdict_and_numbers_behind_it() -> None:
    v = judge(_metrics(2000, 50), None, DEFAULT_SLO)
    assert v.passed and v.label == "ok"
    bad = judge(_metrics(12300, 50), None, DEFAULT_SLO)
    assert not bad.passed
    assert "not for multi-user" in bad.label and "12.30 s > 10.00 s" in bad.label
    check = next(c for c in bad.checks if c.rule == "ttft_p99")
    assert check.value == pytest.approx(12.3) and check.limit == 10.0 and check.passed is False
    failed = judge(_metrics(100, 50, failed=2), None, DEFAULT_SLO)
    assert "2 of 12 requests failed" in failed.label


def test_waiting_queue_rule() -> None:
    server = ServerMetricsSummary(samples=8, waiting_never_drained=True, waiting_mean=4.0, waiting_last=6.0)
    v = judge(_metrics(100, 50), server, DEFAULT_SLO)
    assert not v.passed and "waiting queue never drains" in v.label


def test_slo_overrides() -> None:
    rules = parse_slo(["ttft_p99=500ms", "tpot_mean=off", "e2el_p90=2m,failed=3"])
    assert rules["ttft_p99"] == 0.5 and "tpot_mean" not in rules
    assert rules["e2el_p90"] == 120.0 and rules["failed"] == 3.0
    v = judge(_metrics(800, 999), None, rules)
    assert "800 ms > 500 ms" in v.label and "slow decode" not in v.label
    for bad in ["ttft=1s", "nonsense", "ttft_p99=fast"]:
        with pytest.raises(UsageError):
            parse_slo([bad])
    assert parse_duration_s("1.5") == 1.5 and parse_duration_s("250ms") == 0.25


# ---- suites --------------------------------------------------------------------------------------


def test_seed_suite_matches_the_seeds_and_skips_by_context() -> None:
    seeds = get_suite("seeds")
    shapes = [(s.input_len, s.output_len, s.num_prompts, s.request_rate) for s in seeds]
    assert shapes[:5] == [
        (512, 256, 20, 1.0),
        (2048, 512, 20, 1.0),
        (2048, 512, 30, 3.0),
        (2048, 512, 50, 4.0),
        (14336, 1024, 3, 0.1),
    ]
    assert [(s.input_len, s.output_len, s.num_prompts) for s in seeds[5:]] == [
        (28672, 1024, 1),
        (57344, 2048, 1),
        (122880, 1024, 1),
    ]
    assert len({s.seed for s in seeds}) == len(seeds)  # no scenario reuses another's prompts
    fits_32k = [s.name for s in seeds if s.max_context <= 32768]
    assert fits_32k == [s.name for s in seeds[:6]]
    assert "smoke" in SUITES and get_suite("smoke")[0].num_prompts <= 8
    with pytest.raises(UsageError):
        get_suite("nope")


# ---- workloads (real Qwen3 tokenizer when present) ---------------------------------------------

TOKENIZER_DIRS = [ROOT / ".cache" / "test-tiny", ROOT / ".cache" / "dev-tiny", ROOT / ".gpu" / "tok-qwen3"]


@pytest.fixture(scope="module")
def tokenizer() -> object:
    pytest.importorskip("transformers")
    from llmdeck.bench.workloads import load_tokenizer

    for d in TOKENIZER_DIRS:
        if (d / "tokenizer.json").is_file():
            return load_tokenizer(d)
    pytest.skip("no Qwen3 tokenizer folder in .cache/")


def test_random_prompts_have_exact_token_length(tokenizer: object) -> None:
    from llmdeck.bench.workloads import build_workload

    spec = ScenarioSpec(name="r", input_len=300, output_len=16, num_prompts=6, range_ratio=0.5, seed=4)
    items = build_workload(spec, tokenizer)
    assert len(items) == 6
    for it in items:
        assert it.prompt is not None
        assert len(tokenizer.encode(it.prompt, add_special_tokens=False)) == it.prompt_len  # type: ignore[attr-defined]
        assert 150 <= it.prompt_len <= 450 and 8 <= it.output_len <= 24
    assert len({it.prompt_len for it in items}) > 1
    again = build_workload(spec, tokenizer)
    assert [i.prompt for i in again] == [i.prompt for i in items]  # seeded


def test_shared_prefix_and_multi_turn(tokenizer: object) -> None:
    from llmdeck.bench.workloads import build_workload

    sp = ScenarioSpec(name="p", workload="shared-prefix", prefix_len=200, input_len=50, num_prompts=4)
    items = build_workload(sp, tokenizer)
    heads = {it.prompt[:300] for it in items if it.prompt}
    assert len(heads) == 1 and len({it.prompt for it in items}) == 4
    assert all(it.prompt_len == 250 for it in items)
    mt = ScenarioSpec(
        name="m", workload="multi-turn", endpoint="chat", num_turns=3, input_len=20, num_prompts=6
    )
    turns = build_workload(mt, tokenizer)
    assert [(t.session, t.turn) for t in turns] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_agent_sessions_share_the_system_prompt_and_grow_each_session(tokenizer: object) -> None:
    """agent-sessions: every session opens with the same system prompt of exactly prefix_len tokens,
    and each turn's request is the previous turn's conversation (its reply included) plus a new user
    message: as tokens (the chat template), turn k's prompt is a prefix of turn k+1's, and session
    s's first request shares the whole system prompt with every other session's."""
    from llmdeck.bench.workloads import SessionHistory, build_workload

    tok: Any = tokenizer
    spec = ScenarioSpec(
        name="a", workload="agent-sessions", endpoint="chat", prefix_len=300, input_len=40, num_turns=3,
        num_prompts=9, output_len=16,
    )  # fmt: skip
    items = build_workload(spec, tok)
    assert [(t.session, t.turn) for t in items][:4] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    [system] = {it.system_text for it in items}
    assert system and len(tok.encode(system, add_special_tokens=False)) == 300
    assert len({it.user_text for it in items}) == 9 and all(it.prompt_len == 40 for it in items)

    def ids(msgs: list[dict[str, Any]]) -> list[int]:
        return list(tok.apply_chat_template(msgs, tokenize=True)["input_ids"])

    sent: dict[int, list[list[int]]] = {}
    for sid in range(3):
        history = SessionHistory(items[sid * 3].system_text)
        for it in items[sid * 3 : sid * 3 + 3]:
            msgs = history.ask(it)
            assert msgs[0] == {"role": "system", "content": system} and msgs[-1]["content"] == it.user_text
            sent.setdefault(sid, []).append(ids(msgs))
            history.reply(f"reply {sid}.{it.turn}: " + "ok " * 10)
    system_ids = ids([{"role": "system", "content": system}])
    assert len(system_ids) >= 300
    for turns in sent.values():
        assert all(t[: len(system_ids)] == system_ids for t in turns)  # the shared prefix, every session
        for k in range(1, len(turns)):  # the session's history: the previous request, then more
            assert turns[k][: len(turns[k - 1])] == turns[k - 1] and len(turns[k]) > len(turns[k - 1]) + 40
    firsts = [turns[0] for turns in sent.values()]
    assert len({tuple(f) for f in firsts}) == 3  # the sessions differ after the shared prompt
    # multi-turn is the same sessions without the system prompt; max_context counts the prompt once
    assert all(
        it.system_text is None
        for it in build_workload(spec.model_copy(update={"workload": "multi-turn"}), tok)
    )
    # the system prompt (+16 of template) and 3 turns of 40 in, 16 out, 16 of template each
    assert spec.max_context == (300 + 16) + 3 * (40 + 16 + 16)


def test_jsonl_workload(tmp_path: Path) -> None:
    from llmdeck.bench.workloads import build_workload

    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hi"}\n\n{"messages": [{"role": "user", "content": "yo"}], "max_tokens": 5}\n')
    items = build_workload(ScenarioSpec(name="j", workload="jsonl", jsonl_path=f, num_prompts=3), None)
    assert (
        items[0].prompt == "hi" and items[1].messages and items[1].output_len == 5 and items[2].prompt == "hi"
    )
    f.write_text("{not json}\n")
    with pytest.raises(UsageError, match="not JSON"):
        build_workload(ScenarioSpec(name="j", workload="jsonl", jsonl_path=f), None)


# ---- result files --------------------------------------------------------------------------------


def _result() -> BenchResult:
    return BenchResult(
        target=TargetInfo(base_url="http://127.0.0.1:1", model="m"),
        host=HostFacts(hostname="h", platform="p", python="3.11", cpu_count=2, mem_total_gib=1.0),
        scenarios=[ScenarioResult(spec=ScenarioSpec(name="s"), status="skipped", skip_reason="too long")],
    )


def test_result_file_roundtrip_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    atomic_write_json(p, _result())
    loaded = load_result(p)
    assert loaded.schema_version == 1 and loaded.scenarios[0].skip_reason == "too long"
    assert loaded.llmdeck_version
    with pytest.raises(ResultFileError):
        load_result(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ResultFileError, match="not a JSON"):
        load_result(tmp_path / "bad.json")
    data = json.loads(p.read_text())
    data["schema_version"] = 99
    (tmp_path / "v99.json").write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match="schema version 99"):
        load_result(tmp_path / "v99.json")
    (tmp_path / "other.json").write_text('{"kind": "something"}')
    with pytest.raises(ResultFileError, match="not an llmdeck bench result"):
        load_result(tmp_path / "other.json")


# ---- --repeat: runs in rounds, fresh prompts, median and range ------------------------------


def test_repeats_go_in_rounds_with_a_seed_of_their_own() -> None:
    from llmdeck.bench.repeats import expand_repeats

    specs = [ScenarioSpec(name="a", seed=5, request_rate=1), ScenarioSpec(name="b", seed=6)]
    assert expand_repeats(specs, 1) == specs
    runs = expand_repeats(specs, 3)
    assert [s.name for s in runs] == ["a#1", "b#1", "a#2", "b#2", "a#3", "b#3"]
    assert [s.repeat for s in runs] == [1, 1, 2, 2, 3, 3]
    assert {s.repeat_of for s in runs[::2]} == {"a"} and {s.repeat_of for s in runs[1::2]} == {"b"}
    # no two runs share prompts (a prefix cache would serve the repeats otherwise)
    assert len({s.seed for s in runs}) == 6 and runs[0].seed == 5
    # everything else is the scenario's own, and the table label says which run it is
    assert all(s.request_rate == 1 for s in runs[::2]) and runs[2].label().endswith("#2")
    assert specs[0].name == "a" and specs[0].repeat is None  # the originals are not changed


def test_repeat_summary_is_median_and_range_over_finished_runs() -> None:
    from llmdeck.bench.repeats import expand_repeats, summarize_repeats
    from llmdeck.bench.tables import render_result

    runs = expand_repeats([ScenarioSpec(name="a", request_rate=1)], 4)
    res = _result()
    res.scenarios = [ScenarioResult(spec=s) for s in runs]
    for sr, p99 in zip(res.scenarios[:3], (180.0, 200.0, 190.0), strict=True):
        sr.status, sr.metrics = "done", _metrics(p99, 7.0)
    res.scenarios[1].server_metrics = ServerMetricsSummary(server_mean_ttft_ms=93.0)
    res.scenarios[3].status = "failed"  # a run that died is planned, not measured
    res.scenarios[3].metrics = _metrics(5000.0, 70.0, failed=10)
    [su] = summarize_repeats(res)
    assert su.scenario == "a" and su.runs_planned == 4 and su.runs_measured == 3
    ttft = su.metrics["mean_ttft_ms"]  # _metrics: mean = p99 / 2
    assert (ttft.median, ttft.min, ttft.max) == (95.0, 90.0, 100.0)
    assert ttft.range_pct == pytest.approx(10 / 95 * 100)
    assert su.metrics["p99_ttft_ms"].median == 190.0 and su.metrics["mean_tpot_ms"].range_pct == 0
    assert su.metrics["server_mean_ttft_ms"].median == 93.0  # only where /metrics had it
    assert "mean_itl_ms" not in su.metrics  # no run measured it: left out, not 0
    assert "#" not in su.label
    from rich.console import Console

    con = Console(width=220, record=True)
    render_result(res, con, details=False)
    text = con.export_text()
    assert "Run to run" in text and "3 of 4" in text and "95ms (90ms-100ms, 11%)" in text
    # nothing repeated: no such table, and no summary
    assert summarize_repeats(_result()) == []
    con = Console(width=220, record=True)
    render_result(_result(), con)
    assert "Run to run" not in con.export_text()


# ---- host sampling: NVML that cannot report memory (GB10) ------------------------------------


def test_nvml_not_supported_is_recorded_never_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from llmdeck.bench.monitor import NVML_NOT_REPORTED, _Nvml, sample_host, summarize_host

    class NVMLError_NotSupported(Exception):
        pass

    def mem(_h: object) -> object:
        raise NVMLError_NotSupported("Not Supported")

    fake = types.ModuleType("pynvml")
    fake.nvmlInit = lambda: None  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = lambda i: object()  # type: ignore[attr-defined]
    fake.nvmlDeviceGetName = lambda h: b"NVIDIA GB10"  # type: ignore[attr-defined]
    fake.nvmlDeviceGetMemoryInfo = mem  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nv = _Nvml()
    samples = [sample_host(nv), sample_host(nv)]
    summary = summarize_host(samples, nv)
    gpu = summary.gpus[0]
    assert gpu.name == "NVIDIA GB10"
    assert gpu.used_gib_max is None and gpu.total_gib is None
    assert gpu.note == NVML_NOT_REPORTED
    assert summary.mem_available_gib_min is not None and summary.mem_available_gib_min > 0


def test_plot_without_matplotlib_is_a_clear_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    from llmdeck.bench.result_file import plot_result
    from llmdeck.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    with pytest.raises(MissingDependencyError, match="matplotlib") as info:
        plot_result(_result(), tmp_path / "p.png")
    assert info.value.exit_code == 2 and info.value.hint


def test_plot_of_a_format_llmdeck_does_not_draw_is_a_usage_error(tmp_path: Path) -> None:
    """`--plot x.txt`: matplotlib's ValueError had come out as an internal error."""
    from llmdeck.bench.result_file import plot_result
    from llmdeck.errors import UsageError

    with pytest.raises(UsageError, match="llmdeck draws PNG, SVG or PDF, not 'txt'") as info:
        plot_result(_result(), tmp_path / "x.txt")
    assert info.value.exit_code == 2 and not (tmp_path / "x.txt").exists()


def test_a_result_that_lists_no_scenario_is_refused(tmp_path: Path) -> None:
    """`scenarios: []` had been rendered as an empty table, exit 0."""
    res = _result()
    res.scenarios = []
    atomic_write_json(tmp_path / "r.json", res)
    with pytest.raises(ResultFileError, match="it lists no scenario"):
        load_result(tmp_path / "r.json")


def test_a_duration_that_ends_before_the_first_request_says_so(tmp_path: Path) -> None:
    """`--duration 1e-9`: "Every request failed (0 of them) ... Check that the model answers", where
    no request had been sent at all."""
    from llmdeck.bench.outcome import run_failure
    from llmdeck.bench.result_schema import ScenarioMetrics

    none = ScenarioMetrics(
        completed=0, failed=0, duration_s=0.0, total_input_tokens=0, total_output_tokens=0,
        request_throughput=0.0, output_throughput=0.0, total_token_throughput=0.0,
    )  # fmt: skip
    res = _result()
    spec = ScenarioSpec(name="s", duration_s=1e-9)
    res.scenarios = [ScenarioResult(spec=spec, status="done", metrics=none)]
    error = run_failure(res, tmp_path / "d.json")
    assert error is not None and error.exit_code == 1
    assert "No request was sent" in error.message
    assert "--duration 1e-09 s ended before the first" in error.message
    assert "Every request failed" not in error.message


# ---- report --against: a `vllm bench serve` result next to ours --------------------------------


def _measured(name: str, rate: float | None, conc: int | None, p99_ttft: float) -> ScenarioResult:
    from llmdeck.bench.result_schema import ScenarioMetrics, Stats

    def st(mean: float, p99: float) -> Stats:
        return Stats(n=20, mean=mean, median=mean * 0.9, std=1.0, percentiles={"p50": mean * 0.9, "p99": p99})

    spec = ScenarioSpec(name=name, input_len=512, output_len=256, request_rate=rate, max_concurrency=conc)
    m = ScenarioMetrics(
        completed=20,
        failed=0,
        duration_s=20.5,
        total_input_tokens=20 * 512,
        total_output_tokens=20 * 256,
        request_throughput=0.97,
        output_throughput=250.0,
        total_token_throughput=750.0,
        ttft_ms=st(36.0, p99_ttft),
        tpot_ms=st(2.6, 3.3),
        itl_ms=st(2.6, 4.5),
        e2el_ms=st(700.0, 800.0),
        peak_concurrency=3,
        vllm_compatible_peak_concurrent_requests=4,
        peak_output_tokens_per_s=640.0,
        vllm_compatible_peak_output_tokens_per_s=653.0,
    )
    return ScenarioResult(spec=spec, status="done", metrics=m)


def test_compare_with_a_real_vllm_bench_serve_result() -> None:
    from llmdeck.bench.compare import compare, load_vllm_result

    peer = load_vllm_result(FIX / "vllm-bench-serve-random-512in-256out-20req-1rps.json")
    assert (
        peer.rate == 1.0
        and peer.completed == 20
        and peer.value("p99_ttft_ms") == pytest.approx(67.4616, abs=1e-3)
    )
    res = _result()
    res.scenarios = [_measured("c8", None, 8, 99.0), _measured("seed-1rps", 1.0, None, 70.0)]
    cmp = compare(res, [peer])  # no --scenario: the one whose shape matches
    assert cmp.scenario == "seed-1rps" and cmp.workload_differences == []
    rows = {r.metric: r for r in cmp.rows}
    p99 = rows["p99 TTFT (ms)"]
    assert p99.llmdeck == 70.0 and p99.ratio == pytest.approx(70.0 / peer.value("p99_ttft_ms"))
    assert "p50 TTFT (ms)" not in rows  # only the percentiles vLLM reported
    assert not any("E2EL" in k for k in rows)  # vLLM did not report E2EL here
    peak = rows["peak concurrent requests (vLLM's way)"]
    assert (peak.llmdeck, peak.vllm, peak.note) == (4.0, 4.0, "exact: 3")
    # the other scenario, named: every way the workloads differ is listed
    other = compare(res, [peer], scenario="c8")
    assert any(d.startswith("request rate") and "inf (all at once)" in d for d in other.workload_differences)
    assert any(d.startswith("max concurrency: llmdeck 8, vLLM unlimited") for d in other.workload_differences)
    # a chat run at 16 concurrent (the hybrid fixture): endpoint, rate, concurrency and tokens differ
    chat = load_vllm_result(FIX / "hybrid-vllm-bench-serve-prefix-repetition-4096-256-c8.json")
    diffs = " | ".join(compare(res, [chat], scenario="seed-1rps").workload_differences)
    assert "endpoint: llmdeck completions, vLLM chat" in diffs and "input tokens per request" in diffs
    # two scenarios of the vLLM run's shape: ask which
    res.scenarios.append(_measured("again", 1.0, None, 71.0))
    with pytest.raises(UsageError, match="match the vLLM run"):
        compare(res, [peer])
    with pytest.raises(UsageError, match="no scenario 'nope'"):
        compare(res, [peer], scenario="nope")


def test_compare_repeated_runs_with_several_vllm_files_as_medians() -> None:
    """`bench --repeat 3` against three `vllm bench serve` files: medians on both sides, every run's
    value kept, the repeated scenario found by its own name, one run by NAME#R."""
    from rich.console import Console

    from llmdeck.bench.compare import compare, load_vllm_result, render_comparison
    from llmdeck.bench.repeats import expand_repeats

    fixture = load_vllm_result(FIX / "vllm-bench-serve-random-512in-256out-20req-1rps.json")
    peers = [fixture.model_copy(update={"mean_ttft_ms": v}) for v in (40.0, 30.0, 35.0)]
    res = _result()
    res.scenarios = []
    for spec, p99 in zip(
        expand_repeats([ScenarioSpec(name="seed-1rps")], 3), (60.0, 80.0, 70.0), strict=True
    ):
        run = _measured("x", 1.0, None, p99)
        run.spec = spec.model_copy(update={"input_len": 512, "output_len": 256, "request_rate": 1.0})
        assert run.metrics is not None and run.metrics.ttft_ms is not None
        run.metrics.ttft_ms.mean = p99 / 2
        res.scenarios.append(run)
    res.scenarios.append(_measured("c8", None, 8, 99.0))  # another scenario, another shape
    cmp = compare(res, peers, vllm_files=["a", "b", "c"])
    assert cmp.scenario == "seed-1rps" and (cmp.llmdeck_runs, cmp.vllm_runs) == (3, 3)
    assert cmp.workload_differences == [] and cmp.vllm_files == ["a", "b", "c"]
    rows = {r.metric: r for r in cmp.rows}
    ttft = rows["mean TTFT (ms)"]
    assert (ttft.llmdeck, ttft.vllm, ttft.ratio) == (35.0, 35.0, 1.0)
    assert ttft.llmdeck_runs == [30.0, 40.0, 35.0] and ttft.vllm_runs == [40.0, 30.0, 35.0]
    assert rows["p99 TTFT (ms)"].llmdeck == 70.0
    assert rows["peak concurrent requests (vLLM's way)"].note == "exact: 3, 3, 3"
    con = Console(width=220, record=True)
    render_comparison(cmp, con)
    text = con.export_text()
    assert "median of 3 run(s)" in text and "llmdeck 30.0 / 40.0 / 35.0; vLLM 40.0 / 30.0 / 35.0" in text
    # one run of it, by name: a plain one-to-one comparison
    one = compare(res, peers[:1], scenario="seed-1rps#2")
    assert one.llmdeck_runs == 1 and {r.metric: r for r in one.rows}["mean TTFT (ms)"].llmdeck == 40.0
    assert {r.metric: r for r in one.rows}["mean TTFT (ms)"].llmdeck_runs == []
    with pytest.raises(UsageError, match="Nothing to compare"):
        compare(res, [])


def test_report_against_bad_files_is_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    ours = tmp_path / "r.json"
    res = _result()
    res.scenarios = [_measured("s", 1.0, None, 70.0)]
    atomic_write_json(ours, res)
    (tmp_path / "nofields.json").write_text('{"date": "x", "completed": 3}')

    def report(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "llmdeck", "report", str(ours), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    for args, words in (
        (["--against", str(tmp_path / "missing.json")], "does not exist"),
        (["--against", str(ours)], "is an llmdeck file"),
        (["--against", str(tmp_path / "nofields.json")], "not a `vllm bench serve` result"),
        (["--scenario", "s"], "only applies with --against"),
    ):
        proc = report(*args)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, (
            args,
            proc.stderr,
        )
    ok = report("--against", str(FIX / "vllm-bench-serve-random-512in-256out-20req-1rps.json"))
    assert ok.returncode == 0 and "Same workload shape" in ok.stdout


def test_a_stopped_run_counts_the_requests_it_never_sent_as_not_run_not_failed() -> None:
    """With --max-concurrency 1 and Ctrl-C during request 2 of 10, the verdict had said "8 of 10
    requests failed": the 8 waiting for a slot were recorded "in flight"."""
    import time

    from llmdeck.bench.load import ScenarioRun
    from llmdeck.bench.metrics import compute_metrics
    from llmdeck.bench.result_schema import ScenarioSpec
    from llmdeck.bench.workloads import WorkItem

    spec = ScenarioSpec(name="s", input_len=8, output_len=4, num_prompts=3, max_concurrency=1)
    items = [WorkItem(index=i, output_len=4, prompt="x") for i in range(3)]
    run = ScenarioRun(None, spec, "m", items)  # type: ignore[arg-type]  # no request is sent here
    now = time.perf_counter()
    run.t0 = now
    run.inflight = {0: (items[0], now, now), 1: (items[1], now, None), 2: (items[2], now, None)}
    records = run.unfinished("interrupted", "interrupted")
    assert [r.error_kind for r in records] == ["interrupted", "not_run", "not_run"]
    assert records[1].error == "not sent: interrupted"
    assert compute_metrics(records, 1.0).failed == 1
