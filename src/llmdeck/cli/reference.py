"""The CLI reference, docs/cli.md, written from the app's own click objects.

``make docs`` (``python -m llmdeck.cli.reference docs/cli.md``; without a path it prints to stdout)
regenerates it and tests/unit/test_cli_reference.py fails when the committed file differs. Nothing here is
rendered by rich for a terminal: help texts are read from the commands, their rich markup reduced to
plain text; usage lines, types, ranges and parameter help from the commands' own functions and their
``typer.Option``/``typer.Argument`` declarations, not from typer's help renderer. So the page is the
same at any terminal width or colour setting and under any typer version the project allows.
``llmdeck --help`` never imports this module.
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
docs/cli.md); do not edit by hand: tests/unit/test_cli_reference.py fails when this file is stale. -->

Every command and subcommand of `llmdeck`, with its usage, help, examples and options: what
`llmdeck COMMAND --help` prints, in one page. Every command also takes `-h` / `--help`. Options before `--`
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
    """Every visible command, depth first, in the order they were registered (``COMMAND_MODULES``)."""
    entry = Entry(path, command, ctx)
    yield entry
    for child in children(entry):
        yield from walk(child.command, child.ctx, child.path)


def children(entry: Entry) -> list[Entry]:
    """A group's visible subcommands in registration order (click's ``commands`` dict, whatever order
    a typer version's ``list_commands`` would give)."""
    commands: dict[str, Any] = getattr(entry.command, "commands", None) or {}
    return [
        Entry((*entry.path, name), sub, _context(sub, name, entry.ctx))
        for name, sub in commands.items()
        if not getattr(sub, "hidden", False)
    ]


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
    """``llmdeck plan [OPTIONS] MODEL [-- VLLM_FLAGS...]``: written here, not by typer, whose spelling
    of arguments changes between versions."""
    from llmdeck.cli.launch import LaunchCommand
    from llmdeck.cli.validate import ForwardingCommand

    pieces = [entry.title, "[OPTIONS]"]
    for param in entry.command.params:
        if param.param_type_name == "argument":
            name = param_names(param) + ("..." if param.nargs == -1 else "")
            pieces.append(name if param.required else f"[{name}]")
    if getattr(entry.command, "commands", None):
        pieces.append("COMMAND [ARGS]...")
    if isinstance(entry.command, ForwardingCommand):
        pieces.append("[-- VLLM_FLAGS...]")
    elif isinstance(entry.command, LaunchCommand):
        pieces.append("[-- CLIENT_ARGS...]")
    return " ".join(pieces)


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
    return str(param.metavar or param.name).upper()


def param_type(param: Any, callback: Any) -> str:
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return "flag"
    hint, info = _declared(callback, param.name)
    is_option = param.param_type_name == "option"
    shown = str(param.metavar) if is_option and param.metavar else _type_name(hint)
    if getattr(param, "multiple", False):
        shown += ", repeatable"
    bounds = number_range(getattr(info, "min", None), getattr(info, "max", None))
    return f"{shown} [{bounds}]" if bounds else shown


def _declared(callback: Any, name: str) -> tuple[Any, Any]:
    """(the Python annotation, the ``typer.Option``/``typer.Argument`` info) of a parameter, read from the
    command's function itself: the same whichever typer renders the help."""
    import typing

    func = inspect.unwrap(callback)
    hint = typing.get_type_hints(func).get(name, str)
    info = inspect.signature(func).parameters[name].default
    return hint, info


def _type_name(hint: Any) -> str:
    """``int | None`` → ``int``, ``list[str]`` → ``text``, ``Path`` → ``path``,
    ``tuple[str, str]`` → ``text text``."""
    import types
    import typing
    from pathlib import Path

    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _type_name(args[0]) if len(args) == 1 else " | ".join(_type_name(a) for a in args)
    if origin is list:
        return _type_name(args[0])
    if origin is tuple:
        return " ".join(_type_name(a) for a in args)
    names = {str: "text", int: "int", float: "float", bool: "bool", Path: "path"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def number_range(low: float | None, high: float | None) -> str:
    """A range as ``--help`` writes it: ``1<=x<=65535``, ``x>=1``, ``x<=5``; "" when unbounded."""
    if low is None and high is None:
        return ""
    if low is None:
        return f"x<={high}"
    if high is None:
        return f"x>={low}"
    return f"{low}<=x<={high}"


def param_help(param: Any, callback: Any) -> str:
    """The parameter's help on one line (rich markup to plain text, paragraphs joined), as declared in
    its ``typer.Option``/``typer.Argument`` (older typers keep no help on a click argument)."""
    info = _declared(callback, param.name)[1]
    text = getattr(info, "help", None) or getattr(param, "help", None) or ""
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
            _code(param_type(p, entry.command.callback)),
            _code(default_text(p, entry.ctx)),
            prose(param_help(p, entry.command.callback)),
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
    subs = children(entry)
    if subs:
        out += ["", "Subcommands:", ""]
        out += [f"- [`{s.title}`](#{s.anchor}): {prose(summary(s))}" for s in subs]
    return out


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
