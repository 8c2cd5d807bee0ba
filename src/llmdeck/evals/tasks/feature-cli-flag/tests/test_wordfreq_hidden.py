"""Hidden checks of `--top`: run as the user runs it (a subprocess), old behaviour kept, tests added."""

import subprocess
import sys
from pathlib import Path

import pytest

WORKSPACE = Path(__file__).resolve().parents[1]
TEXT = "the cat and the hat and the bat\nA cat\n"


def run(tmp_path, *args):
    p = tmp_path / "in.txt"
    p.write_text(TEXT)
    return subprocess.run(
        [sys.executable, "-m", "wordfreq", str(p), *args],
        capture_output=True,
        text=True,
        cwd=WORKSPACE,
        timeout=30,
    )


def test_count_unchanged(tmp_path):
    res = run(tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "10"


def test_top_two(tmp_path):
    res = run(tmp_path, "--top", "2")
    assert res.returncode == 0
    assert res.stdout.splitlines() == ["the 3", "and 2"]


def test_ties_alphabetical(tmp_path):
    res = run(tmp_path, "--top", "5")
    assert res.stdout.splitlines() == ["the 3", "and 2", "cat 2", "a 1", "bat 1"]


def test_top_larger_than_vocabulary(tmp_path):
    res = run(tmp_path, "--top", "100")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 6


@pytest.mark.parametrize("bad", ["0", "-1", "x"])
def test_top_must_be_positive(tmp_path, bad):
    res = run(tmp_path, "--top", bad)
    assert res.returncode == 2, res.stdout
    assert res.stdout == ""


def test_agent_added_a_test_for_top():
    tests = [p for p in (WORKSPACE / "tests").rglob("test_*.py")]
    assert any("--top" in p.read_text(encoding="utf-8") for p in tests), "no test mentions --top"
