"""The interconnect verdicts on real all-reduce output (tests/fixtures/cluster, gloo on this machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.cluster.allreduce import bus_factor
from llmdeck.cluster.verdict import PROFILES, LinkProfile, judge, load_rows, parse_rows, profile_for
from llmdeck.errors import ResultFileError, UsageError
from repo_paths import TEST_FIXTURES

FIX = TEST_FIXTURES / "cluster"
GLOO = FIX / "gloo-allreduce-lo-2ranks.jsonl"


def test_rows_of_the_real_gloo_run() -> None:
    rows = load_rows(GLOO)
    assert [r.size_bytes for r in rows] == [8, 1024, 16384, 131072, 1 << 20, 1 << 22, 1 << 24, 1 << 26]
    assert {r.backend for r in rows} == {"gloo"} and {r.world_size for r in rows} == {2}
    for r in rows:  # nccl-tests' definitions hold in every row
        assert r.algbw_gbps == pytest.approx(r.size_bytes / (r.time_us * 1e-6) / 1e9, rel=1e-9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * bus_factor(2))
    assert bus_factor(8) == pytest.approx(1.75)


def test_gloo_run_passes_a_1gbs_expectation_and_fails_a_cx7_link() -> None:
    rows = load_rows(GLOO)
    ok = judge(rows, LinkProfile(name="cpu", rated_gbytes_s=1.0, max_latency_us=1000))
    assert ok.verdict == "pass" and ok.fix == "" and ok.busbw_gbps == pytest.approx(1.379, abs=0.001)
    assert ok.latency_us == pytest.approx(232.8, abs=0.1)
    bad = judge(rows, PROFILES["cx7-200g"])
    assert bad.verdict == "fail" and bad.share < 0.25 and "GLOO_SOCKET_IFNAME" in bad.fix
    assert any("latency" in r for r in bad.reasons)
    slow = judge(rows, LinkProfile(name="x", rated_gbytes_s=3.0, max_latency_us=1000))
    assert slow.verdict == "warn"  # 46% of 3 GB/s: between fail (25%) and pass (60%)


def test_nccl_rows_get_the_nccl_fix() -> None:
    rows = [r.model_copy(update={"backend": "nccl"}) for r in load_rows(GLOO)]
    v = judge(rows, PROFILES["cx7-200g"])
    assert v.verdict == "fail"
    for needle in ("NCCL_IB_HCA", "MTU 9000", "NCCL_IB_GID_INDEX", "NET/Socket"):
        assert needle in v.fix


def test_bad_output_is_a_result_file_error(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="no all-reduce rows"):
        parse_rows("NCCL INFO Bootstrap : Using eth0\n")
    with pytest.raises(ResultFileError, match="not JSON"):
        parse_rows('{"schema": "llmdeck.allreduce/1", \n')
    with pytest.raises(ResultFileError, match="not an all-reduce row"):
        parse_rows('{"schema": "llmdeck.allreduce/1", "backend": "gloo", "world_size": 1}')
    with pytest.raises(ResultFileError, match="Cannot read"):
        load_rows(tmp_path / "missing.jsonl")
    mixed = "NCCL INFO ...\n" + GLOO.read_text()  # NCCL's log lines in between are skipped
    assert len(parse_rows(mixed)) == 8


def test_profiles() -> None:
    assert profile_for(None, 2.5, None).rated_gbytes_s == 2.5
    assert profile_for("ethernet-10g", None, None).rated_gbytes_s == 1.25
    assert profile_for(None, None, 200000).rated_gbytes_s == 25.0
    with pytest.raises(UsageError) as info:
        profile_for("infiniband-9000", None, None)
    assert "cx7-200g" in info.value.render()


def test_cli_netcheck_on_the_saved_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["cluster", "netcheck", "--result", str(GLOO), "--link", "cx7-200g"], capsys)
    assert code == 1 and "fail" in out and "interconnect test failed" in err
    args = [
        "cluster",
        "netcheck",
        "--result",
        str(GLOO),
        "--expect-gbps",
        "1",
        "--max-latency-us",
        "1000",
        "--json",
    ]
    code, out, _ = run_cli(args, capsys)
    assert code == 0 and '"verdict": "pass"' in out


def test_netcheck_json_rows_keep_the_field_names_of_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    """--json had printed each row's ``schema`` as ``schema_`` (the Python attribute's name): the rows
    on stdout did not read back as the rows of the saved file."""
    args = ["cluster", "netcheck", "--result", str(GLOO), "--expect-gbps", "1", "--json"]
    code, out, _ = run_cli(args, capsys)
    rows = json.loads(out)["rows"]
    saved = [json.loads(line) for line in GLOO.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert code in (0, 1) and [set(r) for r in rows] == [set(r) for r in saved]
    assert parse_rows("\n".join(json.dumps(r) for r in rows)) == load_rows(GLOO)


@pytest.mark.parametrize("ranks", ["1", "999"])
def test_local_ranks_are_bounded_before_anything_is_spawned(
    ranks: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--local 200 had spawned 200 torch processes (~140 MB each) on a 2-core, 23 GiB machine."""
    code, _, err = run_cli(["cluster", "netcheck", "--local", ranks], capsys)
    flat = " ".join(err.split())
    assert code == 2 and f"--local {ranks} is not a number of ranks this machine can test" in flat
