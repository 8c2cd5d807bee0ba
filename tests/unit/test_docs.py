"""The README stays a newcomer's path and docs/ holds the rest: the README's length and set-up commands,
every relative link (and anchor) of the README and docs/ resolving, every page reachable from the
README, the README's layer summary naming every layer of the import-linter contract, and every result
file benchmarks/README.md and the evidence READMEs cite by path being there."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest


def _repo_root() -> Path:
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file())


ROOT = _repo_root()
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces to '-'."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    heads = re.findall(r"^#{1,6} (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_readme_is_a_short_path_with_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= 250, f"README.md has {lines} lines (at most 250): move reference text to docs/"
    assert "    make quickstart   #" in text and "    make test         #" in text


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: {broken}"


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [README.resolve()]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.is_file():
            continue
        seen.add(page)
        todo += [(page.parent / t.partition("#")[0]).resolve() for t in _links(page) if t.partition("#")[0]]
    unreachable = [str(p.relative_to(ROOT)) for p in PAGES if p.resolve() not in seen]
    assert not unreachable, f"docs pages no link from README.md leads to: {unreachable}"


def test_the_readme_and_docs_layout_name_every_layer_of_the_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    names = [
        m.strip().removeprefix("llmdeck.") for layer in contract["layers"] for m in re.split(r"[:|]", layer)
    ]
    readme = README.read_text(encoding="utf-8")
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    for name in names:
        shown = f"{name}.py" if (ROOT / "src" / "llmdeck" / f"{name}.py").is_file() else f"{name}/"
        assert shown in readme, f"README.md's Layout does not name the layer package {shown}"
        assert f"`{shown}`" in layout, f"docs/layout.md does not name the layer package {shown}"


EVIDENCE_PAGES = [ROOT / "benchmarks" / "README.md", *sorted((ROOT / "evidence").rglob("README.md"))]
RESULT_PATH = re.compile(r"`((?:[\w.-]+/)*results/(?:[\w.-]+/)*[\w.*-]+\.[a-z][\w.]*)`")


@pytest.mark.parametrize(
    "page", [p for p in EVIDENCE_PAGES if "workspace" not in p.parts], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_result_file_an_evidence_page_names_exists(page: Path) -> None:
    """A result a README cites by path (`results/x.json`, `benchmarks/results/y.json`) is there, from
    the README's folder or the repository's root: a reader can open what a figure stands on."""
    text = page.read_text(encoding="utf-8")
    missing = [t for t in RESULT_PATH.findall(text) if not any(list(b.glob(t)) for b in (page.parent, ROOT))]
    assert not missing, f"{page.relative_to(ROOT)} names result files that are not there: {missing}"
