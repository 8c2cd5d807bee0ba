"""Every command line the user is shown parses with the CLI as it is.

Users copy examples: the ``Examples:`` blocks of every ``--help`` (docs/cli.md is made from them) must
parse as written, options, values and callbacks included; the command lines of the README and docs/
must name only subcommands and options that exist (their MODEL, DIR, N are placeholders, so a value
may fail its type there, never a name).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from llmdeck.cli import reference
from llmdeck.cli.app import _click_exceptions
from repo_paths import ROOT

PLACEHOLDER_KEY = "sk-llmdeck-…"  # the examples' stand-in for a key `llmdeck keys create` printed
SHELL_ENDS = {"|", ">", ">>", "&&", "||", ";"}
click = _click_exceptions()  # click's exceptions, vendored by typer or not
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "README.md"]


def _words(line: str) -> list[str] | None:
    """The words after ``llmdeck`` of one shell line (comment, pipe and redirection dropped), or None
    when the line runs no llmdeck command."""
    line = line.replace(PLACEHOLDER_KEY, "sk-llmdeck-KEY")
    if (inner := re.search(r"\$\((llmdeck [^)]*)\)", line)) is not None:  # eval "$(llmdeck connect ...)"
        line = inner.group(1)
    words = shlex.split(line, comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # VAR=value llmdeck ...
        words.pop(0)
    if not words or words[0] != "llmdeck":
        return None
    cut = next((i for i, w in enumerate(words) if w in SHELL_ENDS), len(words))
    return words[1:cut]


def _parse(words: list[str]) -> None:
    """Parse ``llmdeck WORDS`` the way the CLI does (callbacks too); raises click's usage errors."""
    root = reference._root_command()
    command: Any = root
    ctx: Any = reference._context(root, "llmdeck", None)
    while getattr(command, "commands", None) and words and not words[0].startswith("-"):
        if words[0] not in command.commands:
            raise click.UsageError(f"No such command {words[0]!r}.")
        name, words = words[0], words[1:]
        command = command.commands[name]
        ctx = reference._context(command, name, ctx)
    if "--help" not in words:
        command.make_context(ctx.info_name, list(words), parent=ctx.parent)


def _help_examples() -> list[tuple[str, str]]:
    root = reference._root_command()
    found = []
    for entry in reference.walk(root, reference._context(root, "llmdeck", None)):
        for kind, text in reference.help_blocks(entry.command.help or ""):
            if kind == "code":
                for line in text.replace("\\\n", " ").split("\n"):
                    if _words(line) is not None:
                        found.append((entry.title, line.strip()))
    return found


HELP_EXAMPLES = _help_examples()


def test_the_help_texts_show_examples() -> None:
    assert len(HELP_EXAMPLES) > 100
    assert {title for title, _ in HELP_EXAMPLES} >= {"llmdeck up", "llmdeck plan", "llmdeck cluster"}


@pytest.mark.parametrize(("title", "line"), HELP_EXAMPLES, ids=[f"{t}: {x[:60]}" for t, x in HELP_EXAMPLES])
def test_every_help_example_parses_as_written(title: str, line: str) -> None:
    words = _words(line)
    assert words is not None
    try:
        _parse(words)
    except click.ClickException as exc:
        pytest.fail(f"`{title} --help` shows `{line}`, which the CLI refuses: {exc.format_message()}")


def _page_lines() -> list[tuple[str, str]]:
    """Command lines of the Markdown pages: in code blocks (fenced or indented) and in code spans."""
    found = []
    for page in PAGES:
        if page.name == "cli.md":
            continue  # the help texts, above
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")
        blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
        blocks += re.findall(r"^ {4}(.+)$", text, re.M)
        lines = [line for block in blocks for line in block.split("\n")]
        lines += re.findall(r"`(llmdeck [^`]+)`", text)
        name = str(page.relative_to(ROOT))
        found += [(name, line.strip()) for line in lines if "llmdeck " in line]
    return found


def _names_only(line: str) -> str | None:
    """A synopsis line made parseable: ``[--a | --b X]`` keeps its first choice, ``a|b`` its first."""
    line = re.sub(r"\[([^\[\]]*)\]", lambda m: m.group(1).split(" | ")[0], line)
    line = re.sub(r"(\S+)\|\S+", r"\1", line)
    return line if "…" not in line and "..." not in line else None


def test_every_docs_command_names_only_what_exists() -> None:
    lines = _page_lines()
    assert len(lines) > 60
    wrong = []
    for page, line in lines:
        shown = _names_only(line)
        words = _words(shown) if shown is not None else None
        if not words or words[0] == "COMMAND":
            continue
        try:
            _parse(words)
        except (click.NoSuchOption, click.BadArgumentUsage) as exc:
            wrong.append(f"{page}: `{line}`: {exc.format_message()}")
        except click.UsageError as exc:
            if "No such command" in exc.format_message() or "unexpected extra" in exc.format_message():
                wrong.append(f"{page}: `{line}`: {exc.format_message()}")
        except click.ClickException:
            pass  # a placeholder (MODEL, N) where a value is typed, or a fragment without its arguments
    assert wrong == []


@pytest.mark.parametrize(
    "line",
    [
        "llmdeck up --modle ./tiny",
        "llmdeck statsu",
        "llmdeck connect opencode --server",
        "llmdeck bench mysrv --repeat many",
    ],
)
def test_the_check_catches_a_broken_example(line: str) -> None:
    words = _words(line)
    assert words is not None
    with pytest.raises(click.ClickException):
        _parse(words)
