"""Hidden checks: the report was written by running the script, the parser is exact, nothing else changed."""

import hashlib
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parents[1]
BUILD_SHA256 = "930840569ce71d0e7831b7230a71d27c978e97caef260e1bfb5b77d795253d55"
EXPECTED = "books: 20.00\nfood: 12.80\ntravel: 43.35\ntotal: 76.15\n"


def test_report_written():
    report = WORKSPACE / "report.txt"
    assert report.is_file(), "report.txt was not written: the script was not run after the fix"
    assert report.read_text(encoding="utf-8") == EXPECTED


def test_script_runs_now(tmp_path):
    out = tmp_path / "r.txt"
    res = subprocess.run(
        [sys.executable, "build_report.py", "data/expenses.csv", str(out)],
        cwd=WORKSPACE,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert out.read_text(encoding="utf-8") == EXPECTED


def test_amounts_are_exact():
    sys.path.insert(0, str(WORKSPACE))
    from ledger.parse import parse_amount
    from ledger.summary import totals_by_category

    total = sum(totals_by_category([{"category": "x", "amount": parse_amount("0.10")}] * 3).values())
    assert Decimal(str(total)) == Decimal("0.30") and not isinstance(total, float)


def test_build_script_unchanged():
    digest = hashlib.sha256((WORKSPACE / "build_report.py").read_bytes()).hexdigest()
    assert digest == BUILD_SHA256, "build_report.py was changed"
