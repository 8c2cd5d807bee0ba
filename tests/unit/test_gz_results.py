"""Gzipped result files (how evidence folders keep bench results) read like plain ones, and a corrupt or
oversized one is a one-paragraph error (exit 2), not a traceback or the machine's memory."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.util.gz import InflateError, read_bytes, read_head
from llmdeck.util.kindsniff import has_kind
from repo_paths import ROOT

S14 = ROOT / "evidence" / "tune" / "h200" / "s14"


def test_a_gzipped_bench_result_reports_like_a_plain_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gz = S14 / "bench" / "firstmove.json.gz"
    plain = tmp_path / "firstmove.json"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    code_gz, out_gz, _ = run_cli(["report", str(gz)], capsys)
    code, out, _ = run_cli(["report", str(plain)], capsys)
    assert code_gz == code == 0 and out_gz == out and "prefix-cache hit 75%" in out


def test_a_gzipped_trials_file_is_sniffed_as_one(tmp_path: Path) -> None:
    trials = (S14 / "trials.jsonl").read_bytes()
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(trials))
    assert has_kind(tmp_path / "t.jsonl.gz", "llmdeck.tune.trials")
    assert read_head(tmp_path / "t.jsonl.gz", 10) == trials[:10]


def test_corrupt_and_oversized_gzip_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"\x1f\x8b" + bytes(range(200)))
    code, _, err = run_cli(["report", str(bad)], capsys)
    assert code == 2 and "cannot be inflated" in err and "Traceback" not in err
    assert not has_kind(bad, "llmdeck.bench.result")
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(b'{"kind": "x"}' * 1000)[:40])
    with pytest.raises(InflateError, match="cannot be inflated"):
        read_bytes(cut)
    big = tmp_path / "big.json.gz"
    big.write_bytes(gzip.compress(b" " * (3 << 20)))
    with pytest.raises(InflateError, match="past 2 MiB"):
        read_bytes(big, limit=2 << 20)


def test_a_gzip_bomb_is_too_large_at_the_bound_a_plain_file_gets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One bound for a result's content, gzipped or not; past it, `report` says the file is too large
    (it said "is not a JSON file", with an ``[Errno 27]`` for a plain one). The bound is 256 MiB, 100x
    the largest result llmdeck wrote (a 2 GiB one had cost 16 s and 4.2 GB before it was refused)."""
    import llmdeck.formats.result_file as result_file

    assert result_file.MAX_RESULT_BYTES == 256 << 20
    largest = max(p.stat().st_size for p in (ROOT / "evidence").rglob("*.json"))
    assert largest * 50 < result_file.MAX_RESULT_BYTES
    monkeypatch.setattr(result_file, "MAX_RESULT_BYTES", 1 << 20)  # 256 MiB takes a second to reach
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (8 << 20)))  # 8 MiB of zeros: 8 kB on disk
    assert bomb.stat().st_size < 64 << 10
    plain = tmp_path / "big.json"
    plain.write_bytes(b" " * (2 << 20))
    for path, why in ((bomb, "it inflates past 1 MiB"), (plain, "more than the 1,048,576 llmdeck reads")):
        code, _, err = run_cli(["report", str(path)], capsys)
        assert code == 2 and "is too large to be a result file" in err and why in err, err
        assert "Errno" not in err and "not a JSON file" not in err and "Traceback" not in err


def test_a_tune_will_not_append_to_a_gzipped_trials_file(tmp_path: Path) -> None:
    """Resuming reads it, but the next trial's plain line would land after the gzip stream, unread."""
    from llmdeck.errors import UsageError
    from llmdeck.tune.trials import TRIALS_NAME, open_out_dir, read_trials

    out = tmp_path / "tune"
    out.mkdir()
    (out / TRIALS_NAME).write_bytes(gzip.compress((S14 / "trials.jsonl").read_bytes()))
    header, _ = read_trials(out / TRIALS_NAME)
    with pytest.raises(UsageError, match="gzipped"):
        open_out_dir(out, header, resume=True)


def test_nan_or_infinity_in_an_eval_result_or_a_trial_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bench results refused NaN; eval results rendered it (`nan` s, exit 0) and a trial with goodput NaN
    was chosen as the tune's best over one of 26 req/s."""
    import json
    import shutil

    from cli_helpers import run_cli
    from repo_paths import ROOT

    src = next((ROOT / "evidence" / "eval" / "cpu").glob("*.json"))
    doc = json.loads(src.read_text())
    doc["runs"][0]["agent"]["wall_s"] = float("nan")
    bad = tmp_path / "eval.json"
    bad.write_text(json.dumps(doc))  # Python writes NaN, as an editor might
    code, _, err = run_cli(["report", str(bad)], capsys)
    assert code == 2 and "runs.0.agent.wall_s: nan is not a measurement" in err, err
    tune = tmp_path / "tune"
    shutil.copytree(ROOT / "evidence" / "tune" / "cpu", tune)
    lines = (tune / "trials.jsonl").read_text().splitlines()
    trial = json.loads(lines[1])
    trial["metrics"]["goodput"] = float("inf")
    lines[1] = json.dumps(trial)
    (tune / "trials.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(["report", str(tune)], capsys)
    assert code == 2 and "trials.jsonl:2 " in err and "metrics.goodput: inf is not a measurement" in err, err
