"""`bench --compare`'s parts without an engine: round order, ratios, Ollama's memory, usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from fake_ollama import running


def test_abba_order() -> None:
    from llmdeck.bench.versus import abba_order

    got = [f"{side}{r + 1}" for r, side in abba_order(3)]
    assert got == ["A1", "B1", "B2", "A2", "A3", "B3"]


def _result(ttfts: list[float], hit: float | None) -> object:
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

    def sr(t: float) -> ScenarioResult:
        stats = Stats(n=1, mean=t, median=t, std=0.0, percentiles={"p99": t})
        m = ScenarioMetrics(
            completed=4, failed=0, duration_s=1.0, total_input_tokens=1, total_output_tokens=1,
            request_throughput=1.0, output_throughput=10.0, total_token_throughput=1.0, ttft_ms=stats,
        )  # fmt: skip
        return ScenarioResult(
            spec=ScenarioSpec(name="s"), status="done", metrics=m,
            server_metrics=ServerMetricsSummary(prefix_cache_hit_rate_pct=hit),
        )  # fmt: skip

    host = HostFacts(hostname="h", platform="p", python="3", cpu_count=2, mem_total_gib=1.0)
    return BenchResult(
        target=TargetInfo(base_url="http://x", model="m"), host=host, scenarios=[sr(t) for t in ttfts]
    )


def test_rows_are_medians_and_ratio_b_over_a() -> None:
    from llmdeck.bench.versus import compute_rows

    rows = {r.metric: r for r in compute_rows(_result([100, 140], 80.0), _result([2000, 3000, 4000], None))}  # type: ignore[arg-type]
    ttft = rows["mean TTFT"]
    assert (ttft.a, ttft.b, ttft.ratio) == (120, 3000, 25.0)
    assert ttft.a_runs == [100, 140] and ttft.b_runs == [2000, 3000, 4000]
    hits = rows["prefix-cache hit rate"]
    assert (hits.a, hits.b, hits.ratio) == (80.0, None, None)  # not reported: None, never 0


def test_ollama_memory_sampled_only_from_an_ollama() -> None:
    from llmdeck.bench.versus import ollama_sample

    with running() as (url, fake):
        got = ollama_sample(url, "B1")
    sizes = [m["size"] for m in fake.ps["models"]]
    assert (
        got is not None
        and got.after == "B1"
        and got.bytes == sum(sizes)
        and got.models == ["mistral:latest", "gemma4"]
    )
    assert got.vram_bytes == sum(m["size_vram"] for m in fake.ps["models"])
    from llmdeck.util.net import free_port

    assert ollama_sample(f"http://127.0.0.1:{free_port()}", "A1") is None


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["http://127.0.0.1:1", "--compare", "http://a:1", "http://b:2"], "not both"),
        ([], "give TARGET or --compare"),
        (["--compare", "http://a:1", "http://b:2", "--suite", "agent"], "one workload"),
        (["--compare", "http://a:1", "http://b:2", "--request-rate", "1,2"], "one workload"),
        (["--compare", "http://a:1", "http://b:2", "--html", "x.html"], "--html"),
        # one server: click takes the next option as the second (it had read 'not a valid server name')
        (
            ["--compare", "http://a:1", "--no-metrics"],
            "but after 'http://a:1' came the option '--no-metrics'",
        ),
        (["http://a:1", "--max-concurrency", ","], "--max-concurrency was given no number"),
    ],
)
def test_usage_errors_exit_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["bench", *args, "--num-prompts", "1"], capsys)
    assert code == 2 and words in err and "Traceback" not in err


def test_report_of_a_foreign_kind_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that claims the comparison's kind but is not one: exit 2 naming what is wrong."""
    bad = tmp_path / "cmp.json"
    bad.write_text('{"schema_version": 1, "kind": "llmdeck.bench.versus", "rows": 3}')
    code, _, err = run_cli(["report", str(bad)], capsys)
    assert code == 2 and "not a valid bench comparison result" in err


def test_report_of_another_commands_result_names_its_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `check --json` result passed to `report`: exit 2 naming the command that wrote it and what
    `report` reads (it used to say only "pass a bench result")."""
    other = tmp_path / "check.json"
    other.write_text('{"schema_version": 1, "kind": "llmdeck.check", "client": "opencode"}')
    code, _, err = run_cli(["report", str(other)], capsys)
    words = " ".join(err.split())
    assert code == 2 and "`llmdeck check --json` wrote it" in words
    assert "reads the results of bench, bench --compare, eval and tune" in words


def test_multi_turn_comparisons_show_the_first_and_last_turns_ttft() -> None:
    """The H200's long sessions (evidence/device/ollama/gpu/long/): llama.cpp's time to first token grows
    with a session's history while vLLM's stays flat; the table now says so in two rows of its own."""
    import gzip
    import json

    from llmdeck.bench.versus import VersusResult, compute_rows
    from repo_paths import ROOT

    path = ROOT / "evidence/device/ollama/gpu/long/compare-qwen3-8b-c1-long.json.gz"
    whole = VersusResult.model_validate(json.loads(gzip.decompress(path.read_bytes())))
    rows = {r.metric: r for r in compute_rows(whole.a.result, whole.b.result)}
    first, last = rows["median TTFT, first turn"], rows["median TTFT, last turn"]
    assert first.a is not None and first.b is not None and last.a is not None and last.b is not None
    assert round(first.a) == 82 and round(first.b) == 122 and round(last.a) == 124 and round(last.b) == 1620
    assert [r.metric for r in compute_rows(whole.a.result, whole.b.result)][3:5] == [
        "median TTFT, first turn",
        "median TTFT, last turn",
    ]


def test_single_turn_comparisons_have_no_turn_rows() -> None:
    from llmdeck.bench.versus import compute_rows

    rows = compute_rows(_result([100, 140], 80.0), _result([2000], None))  # type: ignore[arg-type]
    assert not any("turn" in r.metric for r in rows)


def test_a_multi_turn_bench_prints_its_ttft_by_turn() -> None:
    """`bench`'s details (and `report`'s) of a multi-turn run: a line of median TTFT per turn."""
    import gzip
    import json

    from llmdeck.bench.tables import detail_lines
    from llmdeck.bench.versus import VersusResult
    from repo_paths import ROOT

    path = ROOT / "evidence/device/ollama/gpu/long/compare-qwen3-8b-c1-long.json.gz"
    whole = VersusResult.model_validate(json.loads(gzip.decompress(path.read_bytes())))
    lines = [x for x in detail_lines(whole.b.result) if "median TTFT by turn" in x]
    assert lines and lines[0].strip().startswith("median TTFT by turn: 1: 127ms · 2: 188ms")
    assert lines[0].endswith("8: 1.76s")
    assert not [x for x in detail_lines(_result([100], None)) if "by turn" in x]  # type: ignore[arg-type]


def test_a_llamacpp_servers_build_is_its_version() -> None:
    """llama-server has no /version; its /props names the build (real pages: tests/fixtures/llamacpp/),
    which bench records as the server's version when /v1/models says llamacpp owns the model (it was
    "not reported"); a server with neither stays None, and no other server is asked for /props. Its
    context per slot (``meta.n_ctx`` of /v1/models, 4096 on that page) is the target's max_model_len, so
    a scenario longer than it is skipped with the reason rather than failing every request with a 400."""
    import asyncio

    from fake_servers import running
    from llmdeck.bench.result_schema import TargetInfo
    from llmdeck.bench.runner import probe_target
    from llmdeck.client import OpenAIClient

    async def probe(url: str) -> tuple[str | None, str | None, int | None]:
        target = TargetInfo(base_url=url, model="")
        async with OpenAIClient(url) as client:
            await probe_target(client, target)
            return target.model, target.server_version, target.max_model_len

    with running("fake_llamacpp_props_server") as url:
        assert asyncio.run(probe(url)) == ("tiny", "llama.cpp b1-0c1e570", 4096)

    async def build(url: str) -> str | None:
        async with OpenAIClient(url) as client:
            return await client.llamacpp_build()

    with running("fake_404_server") as url:
        assert asyncio.run(build(url)) is None


def test_a_hostile_server_version_prints_as_data() -> None:
    """A peer's /props build (or model id) with terminal escapes and $(...) is shown, never obeyed."""
    import gzip
    import io
    import json

    from rich.console import Console

    from llmdeck.bench.versus import VersusResult
    from llmdeck.cli.bench_compare import render_versus
    from repo_paths import ROOT

    path = ROOT / "evidence/device/ollama/gpu/compare-qwen3-8b-c1.json.gz"
    whole = VersusResult.model_validate(json.loads(gzip.decompress(path.read_bytes())))
    whole.b.result.target.server_version = "llama.cpp \x1b[2J[bold]$(reboot)"
    whole.b.result.target.model = "m\x1b]0;owned\x07"
    buf = io.StringIO()
    render_versus(whole, Console(file=buf, force_terminal=False, width=200))
    out = buf.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "$(reboot)" in out and "[bold]" in out


def test_a_password_in_a_compared_url_is_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--compare http://user:pw@host` (a proxy's credentials): the "comparing A=... and B=..." line
    had printed the password as typed; it is redacted there as in every other message."""
    from llmdeck.util.net import free_port

    url = f"http://user:s3cretpw@127.0.0.1:{free_port()}"
    args = ["bench", "--compare", url, "http://127.0.0.1:1", "--timeout-probe", "2"]
    code, out, err = run_cli([*args, "--out", str(tmp_path / "cmp.json")], capsys)
    assert code == 1 and "comparing A=http://user:<redacted>@127.0.0.1" in err
    assert "s3cretpw" not in out + err


def test_a_server_that_fails_its_probe_leaves_the_earlier_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run again into the same --out while one server is down: the run stops at the probe (exit 1) and
    the earlier comparison stays. The file had been replaced by an empty one whose status said
    "running" (no error), as `bench` itself never does (it writes nothing before its probe passes)."""
    from llmdeck.util.net import free_port

    out = tmp_path / "cmp.json"
    earlier = '{"schema_version": 1, "kind": "llmdeck.bench.versus", "status": "complete"}'
    out.write_text(earlier)
    args = ["bench", "--compare", f"http://127.0.0.1:{free_port()}", "http://127.0.0.1:1"]
    code, _, err = run_cli([*args, "--timeout-probe", "2", "--out", str(out)], capsys)
    assert code == 1 and "Cannot connect" in " ".join(err.split())
    assert out.read_text() == earlier
    assert not list(tmp_path.glob("*.tmp")) and sorted(p.name for p in tmp_path.iterdir()) == ["cmp.json"]
