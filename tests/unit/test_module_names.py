"""Module names say what a module holds (issue 39): no generic models.py / render.py / report.py in the
library. The CLI's modules are named after their commands (`cli/report.py` is `llmdeck report`)."""

from __future__ import annotations

from repo_paths import ROOT

SRC = ROOT / "src" / "llmdeck"
GENERIC = {"models.py", "render.py", "report.py", "utils.py", "helpers.py", "misc.py"}


def test_no_generic_module_names_outside_the_cli() -> None:
    found = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name in GENERIC and p.parent.name != "cli" and "evals/tasks" not in p.as_posix()
    )
    assert found == [], f"name these modules after what they hold: {found}"
