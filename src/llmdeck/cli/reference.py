"""The CLI reference, docs/cli.md, written from the app's own click objects.

``make docs`` (``python -m llmdeck.cli.reference docs/cli.md``; without a path it prints to stdout)
regenerates it and tests/test_cli_reference.py fails when the committed file differs. Nothing here is
rendered by rich for a terminal: help texts are read from the commands, their rich markup reduced to
plain text, and options from the parameters themselves, so the page is the same at any terminal width
or colour setting. ``llmdeck --help`` never imports this module.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

REFRESH = "make docs"
HEADER = f"""# CLI reference

<!-- Generated from the CLI's own definitions by `{REFRESH}` (python -m llmdeck.cli.reference
docs/cli.md); do not edit by hand: tests/test_cli_reference.py fails when this file is stale. -->

Every command and subcommand of `llmdeck`, with its usage, help, examples and options, as
`llmdeck COMMAND --help` prints them. Every command also takes `-h` / `--help`. Options before `--`
are llmdeck's; on `plan`, `up` and `tune` what follows `--` goes to vLLM, on `launch` to the client.
"""


@dataclass(frozen=True)
class Entry:
    """One command of the tree: its words after ``llmdeck``, the click command and its context."""

    path: tuple[str, ...]
    command: Any
    ctx: Any

    @property
    def title(self) -> str:
        return " ".join(("llmdeck", *self.path))

    @property
    def anchor(self) -> str:
        """GitHub's anchor for the section heading ``## `llmdeck a b` ``."""
        return "-".join(("llmdeck", *self.path)).lower()


def _root_command() -> Any:
    import typer.main

    from llmdeck.cli.app import build_app

    return typer.main.get_command(build_app())


def _context(command: Any, name: str, parent: Any | None) -> Any:
    """A click context for ``command`` (the class of the root's own, vendored or not)."""
    return command.context_class(command, info_name=name, parent=parent)


def walk(command: Any, ctx: Any, path: tuple[str, ...] = ()) -> Iterator[Entry]:
    """Every visible command, depth first, in the order ``--help`` lists them."""
    yield Entry(path, command, ctx)
    commands = getattr(command, "commands", None)
    if not commands:
        return
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or getattr(sub, "hidden", False):
            continue
        yield from walk(sub, _context(sub, name, ctx), (*path, name))


def plain(text: str) -> str:
    """Rich markup to the text a terminal shows (``[bold]x[/]`` → ``x``, ``\\[`` → ``[``)."""
    from rich.text import Text

    return Text.from_markup(text).plain


def help_blocks(text: str) -> list[tuple[str, str]]:
    """A help text as ("prose" | "code", text) paragraphs, the way typer's rich help lays it out.

    Prose paragraphs are joined into one line; a paragraph with an indented line (examples, tables)
    or click's ``\\b`` marker keeps its lines, dedented.
    """
    text = plain(inspect.cleandoc(text).partition("\f")[0])
    blocks: list[tuple[str, str]] = []
    for para in text.split("\n\n"):
        lines = [line for line in para.split("\n") if line.strip() != "\b"]
        if not any(line.strip() for line in lines):
            continue
        if para.startswith("\b") or any(line[:1].isspace() for line in lines):
            body = textwrap.dedent("\n".join(line.replace("\b", "") for line in lines)).strip("\n")
            if blocks and blocks[-1][0] == "code":
                blocks[-1] = ("code", blocks[-1][1] + "\n\n" + body)
            else:
                blocks.append(("code", body))
        else:
            blocks.append(("prose", " ".join(line.strip() for line in lines)))
    return blocks


def usage(entry: Entry) -> str:
    pieces = entry.command.collect_usage_pieces(entry.ctx)
    return " ".join([entry.title, *pieces])


def summary(entry: Entry) -> str:
    """The command's first line, as the group's command list shows it."""
    blocks = help_blocks(entry.command.help or "")
    return blocks[0][1] if blocks and blocks[0][0] == "prose" else ""


def default_text(param: Any, ctx: Any) -> str:
    """The default as ``--help`` shows it ("" when it shows none)."""
    if param.show_default is False:
        return ""
    if isinstance(param.show_default, str):
        return f"({param.show_default})"
    value = param.get_default(ctx, call=False)
    return _default_value(param, value)


def _default_value(param: Any, value: Any) -> str:
    if value is None:
        return ""
    if callable(value):
        return "(dynamic)"
    if isinstance(value, list | tuple):
        return ", ".join(p for p in (_default_value(param, v) for v in value) if p)
    if isinstance(value, Enum):
        return str(value.value)
    if getattr(param, "is_bool_flag", False):
        if param.secondary_opts:
            return str((param.opts if value else param.secondary_opts)[0]).lstrip("-")
        return "" if not value else str(value)
    return str(value)


def param_names(param: Any) -> str:
    if param.param_type_name == "option":
        return ", ".join([*param.opts, *param.secondary_opts])
    return str(param.metavar or param.name)


def param_type(param: Any, ctx: Any) -> str:
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return "flag"
    display = getattr(param, "display_type_rich", None)
    shown = str(display(ctx)) if display is not None else str(param.make_metavar(ctx))
    bounds = number_range(getattr(param, "min", None), getattr(param, "max", None))
    return f"{shown} [{bounds}]" if bounds else shown


def number_range(low: float | None, high: float | None) -> str:
    """A range as ``--help`` writes it: ``1<=x<=65535``, ``x>=1``, ``x<=5``; "" when unbounded."""
    if low is None and high is None:
        return ""
    if low is None:
        return f"x<={high}"
    if high is None:
        return f"x>={low}"
    return f"{low}<=x<={high}"


def param_help(param: Any) -> str:
    """The parameter's help on one line (rich markup to plain text, paragraphs joined)."""
    text = getattr(param, "help", None) or ""
    parts = [p[1] if p[0] == "prose" else p[1].replace("\n", " ") for p in help_blocks(text)]
    extra = [" ".join(parts)] if parts else []
    if param.required:
        extra.append("Required.")
    return " ".join(extra)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def prose(text: str) -> str:
    """Help prose as Markdown text: ``<`` and ``*`` escaped outside code spans, so that
    ``FILE.bak-<timestamp>`` is not taken for an HTML tag nor ``a*b*c`` for emphasis."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans to keep
        parts = [text]
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("\\", "\\\\").replace("<", "\\<").replace("*", "\\*")
    return "`".join(parts)


def _code(text: str) -> str:
    """``text`` as a code span, with enough backticks around it."""
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def params_table(entry: Entry, kind: str) -> list[str]:
    """The Markdown table of the command's arguments or options ([] when it has none)."""
    params = [p for p in entry.command.params if p.param_type_name == kind]
    params = [p for p in params if not getattr(p, "hidden", False)]
    if not params:
        return []
    head = "Argument" if kind == "argument" else "Option"
    rows = [f"| {head} | Type | Default | Description |", "|---|---|---|---|"]
    for p in params:
        cells = (
            _code(param_names(p)),
            _code(param_type(p, entry.ctx)),
            _code(default_text(p, entry.ctx)),
            prose(param_help(p)),
        )
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return ["", *rows]


def section(entry: Entry) -> list[str]:
    """One command's section: heading, usage, help (examples as code blocks), arguments, options."""
    level = "#" * min(2 + max(len(entry.path) - 1, 0), 4)
    out = [f"{level} `{entry.title}`", "", "```text", f"Usage: {usage(entry)}", "```"]
    for kind, text in help_blocks(entry.command.help or ""):
        out += ["", prose(text)] if kind == "prose" else ["", "```text", text, "```"]
    if getattr(entry.command, "deprecated", False):
        out += ["", "*Deprecated.*"]
    out += params_table(entry, "argument")
    out += params_table(entry, "option")
    subs = _children(entry)
    if subs:
        out += ["", "Subcommands:", ""]
        out += [f"- [`{s.title}`](#{s.anchor}): {prose(summary(s))}" for s in subs]
    return out


def _children(entry: Entry) -> list[Entry]:
    commands = getattr(entry.command, "commands", None) or {}
    found = []
    for name in entry.command.list_commands(entry.ctx) if commands else []:
        sub = entry.command.get_command(entry.ctx, name)
        if sub is not None and not getattr(sub, "hidden", False):
            found.append(Entry((*entry.path, name), sub, _context(sub, name, entry.ctx)))
    return found


def render_reference() -> str:
    """docs/cli.md's text: the header, a contents list, then one section per command."""
    root = _root_command()
    entries = list(walk(root, _context(root, "llmdeck", None)))
    out = [HEADER.rstrip("\n"), "", "## Contents", ""]
    for e in entries:
        indent = "  " * max(len(e.path) - 1, 0)
        out.append(f"{indent}- [`{e.title}`](#{e.anchor})")
    for e in entries:
        out += ["", *section(e)]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m llmdeck.cli.reference [PATH]``: the reference to stdout, or written to PATH atomically."""
    args = sys.argv[1:] if argv is None else argv
    text = render_reference()
    if not args:
        sys.stdout.write(text)
        return
    from pathlib import Path

    from llmdeck.util.atomic import atomic_write_text

    atomic_write_text(Path(args[0]), text)


if __name__ == "__main__":
    main()
