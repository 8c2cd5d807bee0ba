"""The CLI's timeout options are defined once (llmdeck.cli.options), each flag with one meaning.

A command that declared its own ``--timeout`` again, or gave a timeout a help text outside the fixed set of
meanings, fails here; so does a primary ``--timeout`` that means anything but the limit for each request,
and an older name (``up --timeout``, ``eval --timeout``, ``cluster up --timeout``) that stopped working.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from llmdeck.cli import options, reference
from repo_paths import SRC

CLI_DIR = SRC / "llmdeck" / "cli"
TIMEOUT_FLAG = re.compile(r"^--[\w-]*timeout[\w-]*$")


def _timeout_literals(path: Path) -> list[str]:
    """Every string constant in the module that is a timeout flag's name (not prose mentioning one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.name}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TIMEOUT_FLAG.match(node.value)
    ]


def test_no_command_declares_a_timeout_flag_of_its_own() -> None:
    found = [
        hit for p in sorted(CLI_DIR.glob("*.py")) if p.name != "options.py" for hit in _timeout_literals(p)
    ]
    assert found == [], (
        "declare timeout options in llmdeck/cli/options.py, not in the command:\n" + "\n".join(found)
    )
    assert _timeout_literals(CLI_DIR / "options.py")  # the scan does see the flags where they are


def _timeout_options() -> list[tuple[str, list[str], str]]:
    """(command, the option's names, its help) for every option of the app with "timeout" in a name."""
    root = reference._root_command()
    found = []
    for entry in reference.walk(root, reference._context(root, "llmdeck", None)):
        for param in entry.command.params:
            names = [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]
            if param.param_type_name == "option" and any("timeout" in n for n in names):
                found.append((entry.title, names, reference.param_help(param, entry.command.callback)))
    return found


def _meaning(help_text: str) -> str | None:
    hits = [key for key, words in options.MEANINGS.items() if help_text.startswith(words)]
    return max(hits, key=lambda k: len(options.MEANINGS[k])) if hits else None


def test_every_timeout_option_says_one_of_the_fixed_meanings() -> None:
    found = _timeout_options()
    assert len(found) >= 19, found  # every command with a timeout is walked
    for title, names, help_text in found:
        assert _meaning(help_text), f"{title} {names}: help {help_text!r} is not one of options.MEANINGS"


def test_each_primary_flag_has_one_meaning_and_timeout_is_the_request_limit() -> None:
    meanings: dict[str, set[str | None]] = {}
    for _title, names, help_text in _timeout_options():
        meanings.setdefault(names[0], set()).add(_meaning(help_text))
    assert {k: v for k, v in meanings.items() if len(v) != 1} == {}
    assert meanings["--timeout"] == {"request"}
    assert meanings["--ready-timeout"] == {"ready"}
    assert meanings["--task-timeout"] == {"task"}


@pytest.mark.parametrize(
    "path",
    [("up",), ("restart",), ("eval",), ("cluster", "up"), ("cluster", "status"), ("cluster", "logs"),
     ("cluster", "netcheck")],
)  # fmt: skip
@pytest.mark.parametrize("which", [0, 1])
def test_the_older_timeout_name_still_sets_the_same_value(path: tuple[str, ...], which: int) -> None:
    root = reference._root_command()
    ctx: Any = reference._context(root, "llmdeck", None)
    command: Any = root
    for word in path:
        command = command.commands[word]
        ctx = reference._context(command, word, ctx)
    option = next(p for p in command.params if p.name == "timeout")
    assert option.opts[1:] == ["--timeout"], option.opts  # the primary name first, the older one kept
    parsed = command.make_context(
        path[-1], [option.opts[which], "42"], parent=ctx.parent, resilient_parsing=True
    )
    assert parsed.params["timeout"] == 42.0


@pytest.mark.parametrize("flag", ["--ready-timeout", "--timeout"])
def test_both_names_of_up_reject_a_bad_value(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["up", "--model", "./m", flag, "0"], capsys)
    assert code == 2
    assert "--ready-timeout" in err and "not allowed" in err
