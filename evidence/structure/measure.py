"""Issue 39's countable criteria, measured from a source tree's own code (ast only; nothing is imported).

    python evidence/structure/measure.py                  # this checkout's src/llmdeck
    python evidence/structure/measure.py /tmp/old/src/llmdeck --json
    git archive e7022cf src | tar -x -C /tmp/old          # a tree from before the redesign

Prints: modules and lines per package; the package-to-package imports (at module level and inside
functions) and whether each runs down pyproject's layer contract; engine string tests outside engines/;
exception classes not under LlmdeckError; the modules that parse a model's config.json themselves.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

ENGINE_NAMES = {"cpu", "venv", "docker", "llamacpp"}
JSON_PARSE = re.compile(r"\b(json\.loads?|_json_loads|jsonsafe\.loads)\(")
BUILTIN_ERRORS = {
    "Exception",
    "BaseException",
    "ValueError",
    "RuntimeError",
    "OSError",
    "TypeError",
    "KeyError",
}


def package_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported_package(node: ast.Import | ast.ImportFrom, here: list[str]) -> list[str]:
    """The llmdeck packages one import statement names (relative imports resolved from `here`)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.level:
        base = here[: len(here) - node.level]
        names = [".".join(["llmdeck", *base, *(node.module or "").split(".")]).rstrip(".")]
    else:
        names = [node.module or ""]
    out = []
    for name in names:
        bits = name.split(".")
        if bits[0] == "llmdeck" and len(bits) > 1:
            out.append(bits[1])
    return out


def layer_floors(pyproject: Path) -> dict[str, int]:
    data = tomllib.loads(pyproject.read_text())
    contract = next(c for c in data["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    floors: dict[str, int] = {}
    for i, layer in enumerate(reversed(contract["layers"])):
        for name in layer.split("|"):
            floors[name.strip().removeprefix("llmdeck.")] = i
    return floors


def is_engine_test(node: ast.Compare) -> bool:
    sides = [node.left, *node.comparators]
    strs = {s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)}
    strs |= {
        e.value
        for s in sides
        if isinstance(s, ast.Tuple | ast.Set | ast.List)
        for e in s.elts
        if isinstance(e, ast.Constant) and isinstance(e.value, str)
    }
    named = any("engine" in ast.unparse(s).lower() for s in sides)
    return named and bool(strs & ENGINE_NAMES)


def measure(root: Path, pyproject: Path) -> dict[str, object]:
    floors = layer_floors(pyproject)
    modules: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    edges: Counter[tuple[str, str, str]] = Counter()
    engine_tests: list[str] = []
    classes: dict[str, tuple[str, list[str]]] = {}
    config_parsers: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        pkg, rel = package_of(path, root), str(path.relative_to(root))
        text = path.read_text()
        tree = ast.parse(text)
        modules[pkg] += 1
        lines[pkg] += text.count("\n")
        here = list(path.relative_to(root).with_suffix("").parts)
        in_functions = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                where = "function" if id(node) in in_functions else "module"
                for target in imported_package(node, here):
                    if target != pkg:
                        edges[(pkg, target, where)] += 1
            elif isinstance(node, ast.Compare) and is_engine_test(node) and pkg != "engines":
                engine_tests.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.ClassDef):
                classes[node.name] = (rel, [ast.unparse(b).split(".")[-1] for b in node.bases])
        if "config.json" in text and JSON_PARSE.search(text) and ("def read" in text or "def parse" in text):
            config_parsers.add(rel)
    return {
        "packages": {p: {"modules": modules[p], "lines": lines[p]} for p in sorted(modules)},
        "imports": [
            {
                "from": a,
                "to": b,
                "where": w,
                "count": n,
                "down_the_layers": floors.get(a, 99) > floors.get(b, -1)
                if a in floors and b in floors
                else None,
            }
            for (a, b, w), n in sorted(edges.items())
        ],
        "engine_string_tests_outside_engines": engine_tests,
        "exceptions_outside_LlmdeckError": outside_error_tree(classes),
        "modules_parsing_config_json": sorted(config_parsers),
    }


def outside_error_tree(classes: dict[str, tuple[str, list[str]]]) -> list[str]:
    def root_of(name: str, seen: frozenset[str] = frozenset()) -> str | None:
        if name in BUILTIN_ERRORS or name == "LlmdeckError":
            return name
        if name not in classes or name in seen:
            return None
        for base in classes[name][1]:
            found = root_of(base, seen | {name})
            if found:
                return found
        return None

    return sorted(
        f"{classes[c][0]}:{c}" for c in classes if c != "LlmdeckError" and root_of(c) in BUILTIN_ERRORS
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", default="src/llmdeck", type=Path)
    parser.add_argument("--pyproject", default="pyproject.toml", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.src.is_dir() or not args.pyproject.is_file():
        print(
            f"measure.py: {args.src} must be a package folder (src/llmdeck) and {args.pyproject} the "
            "pyproject.toml with its layer contract; run it from the repository root, or give both.",
            file=sys.stderr,
        )
        return 2
    result = measure(args.src, args.pyproject)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        return 0
    pk = result["packages"]
    assert isinstance(pk, dict)
    print(
        f"{len(pk)} packages, {sum(v['modules'] for v in pk.values())} modules, "
        f"{sum(v['lines'] for v in pk.values())} lines"
    )
    for name, v in pk.items():
        print(f"  {name:10} {v['modules']:3} modules {v['lines']:6} lines")
    imports = result["imports"]
    assert isinstance(imports, list)
    inside = sum(i["count"] for i in imports if i["where"] == "function")
    print(
        f"package-to-package imports: {len(imports)} (pair, place); {inside} of "
        f"{sum(i['count'] for i in imports)} statements inside functions"
    )
    up = [i for i in imports if i["down_the_layers"] is False]
    print(f"  against the layer contract: {len(up)}")
    for key in (
        "engine_string_tests_outside_engines",
        "exceptions_outside_LlmdeckError",
        "modules_parsing_config_json",
    ):
        found = result[key]
        assert isinstance(found, list)
        print(f"{key.replace('_', ' ')}: {len(found)}" + "".join(f"\n  {f}" for f in found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
