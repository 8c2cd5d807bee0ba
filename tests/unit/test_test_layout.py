"""The tests split by kind (issue 39): tests/unit, tests/integration, tests/e2e, the helpers in tests/.

A test file dropped at the top again, a server test left in unit (or unmarked), an e2e file without its
marker, or a path counted in parents from a test's own file fails here.
"""

from __future__ import annotations

import re

import pytest

from repo_paths import ROOT, TESTS

KINDS = ("unit", "integration", "e2e")
INTEGRATION = re.compile(r"pytest\.mark\.integration\b")
E2E = re.compile(r"pytest\.mark\.e2e\b")
PARENTS = re.compile(r"__file__\)(\.resolve\(\))?\.parents?\b")


def _tests(kind: str) -> list[str]:
    return sorted(p.name for p in (TESTS / kind).glob("test_*.py"))


def test_no_test_file_sits_at_the_top_of_tests() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    assert all(_tests(kind) for kind in KINDS)


def test_unit_tests_start_nothing_real() -> None:
    marked = [n for n in _tests("unit") if INTEGRATION.search((TESTS / "unit" / n).read_text())]
    assert marked == [], "an integration test belongs in tests/integration (or tests/e2e)"


@pytest.mark.parametrize("kind", ["integration", "e2e"])
def test_every_integration_and_e2e_file_is_marked_integration(kind: str) -> None:
    unmarked = [n for n in _tests(kind) if not INTEGRATION.search((TESTS / kind / n).read_text())]
    assert unmarked == [], f"tests/{kind} holds tests marked `integration`"


def test_e2e_is_marked_e2e_and_only_there() -> None:
    unmarked = [n for n in _tests("e2e") if not E2E.search((TESTS / "e2e" / n).read_text())]
    elsewhere = [
        f"{kind}/{n}"
        for kind in ("unit", "integration")
        for n in _tests(kind)
        if E2E.search((TESTS / kind / n).read_text())
    ]
    assert unmarked == [] and elsewhere == []


def test_e2e_marker_is_registered(pytestconfig: pytest.Config) -> None:
    names = [line.split(":")[0] for line in pytestconfig.getini("markers")]
    assert "integration" in names and "e2e" in names


def test_no_test_counts_parents_from_its_own_file() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted(TESTS.rglob("*.py"))
        if p.name != "repo_paths.py" and PARENTS.search(p.read_text())
    ]
    assert offenders == [], "use repo_paths.ROOT / TEST_FIXTURES / SHARED"
    assert (ROOT / "pyproject.toml").is_file()
