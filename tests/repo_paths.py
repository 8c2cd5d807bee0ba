"""Where things are, for every kind of test (tests/unit, tests/integration, tests/e2e and the helpers here).

One place that knows the layout, so a test never counts parents from its own file: moving a test between
the kind folders changes nothing.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SRC = ROOT / "src"
# tests/fixtures: the small recorded inputs kept with the tests
TEST_FIXTURES = TESTS / "fixtures"
# ../shared: real vLLM logs, /metrics pages, bench results, configs and seeds next to the checkout
SHARED = ROOT.parent / "shared"
