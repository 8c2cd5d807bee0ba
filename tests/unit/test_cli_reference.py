"""docs/cli.md is the CLI as it is: regenerated here, compared with the committed file, the same at any
terminal width or colour setting, and never imported by ``llmdeck --help``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from llmdeck.cli import reference


def _repo_root() -> Path:
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file())


CLI_MD = _repo_root() / "docs" / "cli.md"


def test_docs_cli_md_is_the_cli_as_it_is() -> None:
    committed = CLI_MD.read_text(encoding="utf-8") if CLI_MD.is_file() else ""
    fresh = reference.render_reference()
    assert committed == fresh, (
        "docs/cli.md is stale (a command, option or help text changed): run `make docs` "
        "(python -m llmdeck.cli.reference docs/cli.md) and commit docs/cli.md"
    )


def test_the_reference_does_not_depend_on_the_terminal_or_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = reference.render_reference()
    for name, value in {
        "COLUMNS": "40",
        "LINES": "10",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "FORCE_COLOR": "1",
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "LLMDECK_PORT": "9999",
        "LLMDECK_HOST": "10.1.2.3",
        "LLMDECK_MODELS_DIR": str(tmp_path / "models"),
    }.items():
        monkeypatch.setenv(name, value)
    assert reference.render_reference() == first


def test_every_command_and_option_has_its_place() -> None:
    root = reference._root_command()
    text = reference.render_reference()
    entries = list(reference.walk(root, reference._context(root, "llmdeck", None)))
    assert len(entries) > 30  # every group's subcommands, not only the top level
    for entry in entries:
        assert f"# `{entry.title}`" in text, entry.title
        assert f"](#{entry.anchor})" in text, entry.anchor
        assert f"Usage: {entry.title}" in text, entry.title
        for param in entry.command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{reference.param_names(param)}`" in text, (entry.title, param.opts)


# Any ``[...]`` in a help text: rich eats one that starts lower-case as markup (``[random]`` had
# vanished from --workload's help, ``[that list]`` from status's), and shows the rest as typed
# (``[LLMDECK_RESULTS_DIR/bench-*.json]``), which the project's rule forbids: a default is said in
# words, "(default: ...)". Rich's own style tags are fine; so is an escaped ``\[`` in a command's
# text (a YAML or JSON example), never in an option's or an argument's.
_BRACKETED = re.compile(r"(\\?)\[([^\[\]\n]+)\]")
_STYLES = {"bold", "/", "dim", "/dim", "/bold", "italic", "/italic"}


def _bracketed(text: str, *, is_param: bool) -> list[str]:
    return [
        m.group(0)
        for m in _BRACKETED.finditer(text)
        if m.group(2) not in _STYLES and (is_param or not m.group(1))
    ]


def test_help_texts_say_defaults_in_words_not_in_brackets() -> None:
    root = reference._root_command()
    found = []
    for entry in reference.walk(root, reference._context(root, "llmdeck", None)):
        found += [(entry.title, None, b) for b in _bracketed(entry.command.help or "", is_param=False)]
        for p in entry.command.params:
            text = getattr(p, "help", None) or ""
            found += [(entry.title, p.name, b) for b in _bracketed(text, is_param=True)]
    assert not found, f"brackets in --help texts: {found}"


@pytest.mark.parametrize(
    ("text", "is_param", "caught"),
    [
        ("Result JSON file [LLMDECK_RESULTS_DIR/bench-*.json].", True, True),
        ("What to send [random].", True, True),
        ("Shown as typed \\[x].", True, True),
        ("An object {servers: [that list]}.", False, True),
        ("A YAML list: \\[qwen-fast].", False, False),
        ("[bold]Styled[/bold], [dim]dimmed[/].", True, False),
        ("jq '.models // []'", False, False),
    ],
)
def test_the_bracket_check_catches_any_case(text: str, is_param: bool, caught: bool) -> None:
    assert bool(_bracketed(text, is_param=is_param)) is caught


def test_help_never_imports_the_generator() -> None:
    probe = (
        "import sys; from llmdeck.cli.app import build_app; build_app(); "
        "print('llmdeck.cli.reference' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_generator_writes_the_file_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.md"
    reference.main([str(out)])
    assert out.read_text(encoding="utf-8") == reference.render_reference()
    reference.main([])
    assert capsys.readouterr().out == out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FILE.bak-<timestamp>", "FILE.bak-\\<timestamp>"),
        ("`a<b` and a*b", "`a<b` and a\\*b"),
        ("one ` alone <x>", "one ` alone \\<x>"),
    ],
)
def test_prose_escapes_html_and_emphasis_outside_code(text: str, expected: str) -> None:
    assert reference.prose(text) == expected


def test_help_blocks_keep_examples_as_code_and_join_prose() -> None:
    text = "First line\ncontinued.\n\nExamples:\n\n  llmdeck up   # [bold]x[/]\n\n  llmdeck down"
    blocks = reference.help_blocks(text)
    assert blocks == [
        ("prose", "First line continued."),
        ("prose", "Examples:"),
        ("code", "llmdeck up   # x\n\nllmdeck down"),
    ]
