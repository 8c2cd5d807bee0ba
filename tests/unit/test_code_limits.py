"""The size rules of the brief: no module over 400 lines, no function over 60 (src/llmdeck, by `ast`).

A function's length runs from its first decorator to its last line. ``ALLOWED`` lists the
offenders not fixed yet, at their current size: they may shrink, never grow, and no new offender may
appear. When one shrinks or is fixed, lower or delete its entry (the last test says which).
"""

from __future__ import annotations

import ast
from pathlib import Path

from repo_paths import ROOT

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
SRC = ROOT / "src" / "llmdeck"

# "path" -> lines, "path:qualified.name" -> lines (paths relative to src/llmdeck). Shrink it.
ALLOWED: dict[str, int] = {
    # 104 of its lines are the typer options of the signature (the body builds a BenchRequest)
    "cli/bench.py:bench": 156,
}


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included."""
    out: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append((name, (node.end_lineno or node.lineno) - start + 1))
            out += _functions(node, name + ".")
        else:
            out += _functions(node, prefix)
    return out


def measure() -> dict[str, int]:
    """Every module over MAX_MODULE_LINES and every function over MAX_FUNCTION_LINES, with its size."""
    found: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[rel] = lines
        for name, length in _functions(ast.parse(text, filename=rel)):
            if length > MAX_FUNCTION_LINES:
                found[f"{rel}:{name}"] = length
    return found


def test_the_scan_sees_functions_methods_and_nested_ones() -> None:
    tree = ast.parse(
        "@d\ndef a():\n    def b():\n        pass\n\nclass C:\n    async def m(self):\n        pass\n"
    )
    assert _functions(tree) == [("a", 4), ("a.b", 2), ("C.m", 2)]


def test_no_new_module_or_function_over_the_limits() -> None:
    new = {k: v for k, v in measure().items() if k not in ALLOWED}
    assert not new, (
        f"Over the size rules (modules <= {MAX_MODULE_LINES} lines, functions <= {MAX_FUNCTION_LINES}): "
        f"{new}. Split them by topic / into well-named helpers; do not add them to ALLOWED."
    )


def test_allowed_offenders_do_not_grow() -> None:
    grown = {k: (ALLOWED[k], v) for k, v in measure().items() if k in ALLOWED and v > ALLOWED[k]}
    assert not grown, f"These allow-listed offenders grew (allowed, now): {grown}. Shrink them instead."


def test_allow_list_is_current() -> None:
    """A reminder to shrink the list: an entry that shrank or was fixed must be lowered or deleted."""
    now = measure()
    stale = {k: now.get(k) for k, v in ALLOWED.items() if now.get(k, 0) < v}
    assert not stale, (
        f"ALLOWED in {Path(__file__).name} is out of date (entry: size now, None = fixed): {stale}. "
        "Lower those numbers and delete the fixed entries."
    )
