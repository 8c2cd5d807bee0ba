"""The llmdeck CLI root: registers every command group and maps errors to exit codes.

Each module in ``COMMAND_MODULES`` is one command group; it exposes ``register(app)`` and
imports nothing heavy at module level, so ``llmdeck --help`` stays instant.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer

from llmdeck import __version__

# One place that lists the command groups, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "quickstart",
    "plan",
    "fetch",
    "server",
    "check",
    "connect",
    "bench",
    "model",
)

HELP = """llmdeck: one GPU box as a dependable local LLM server for coding agents.

Typical flow: [bold]plan[/] a model for the machine, [bold]fetch[/] it, bring it [bold]up[/],
[bold]check[/] it for your agent, [bold]bench[/] it, [bold]connect[/] your client.

Examples:

  llmdeck quickstart                      # the whole flow on whatever this machine has

  llmdeck up --model ./tiny --port 8000   # serve a model dir in the background

  llmdeck status --json
"""


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"llmdeck {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="llmdeck",
        help=HELP,
        no_args_is_help=True,
        rich_markup_mode="rich",
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def root(
        ctx: typer.Context,
        version: bool = typer.Option(
            False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ) -> None:
        from llmdeck.settings import Settings

        ctx.obj = Settings()

    for name in COMMAND_MODULES:
        module = importlib.import_module(f"llmdeck.cli.{name}")
        module.register(app)
    return app


def _click_exceptions() -> Any:
    """click's exception module: typer >= 0.2x vendors click as typer._click, older typer uses click."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def _debug() -> bool:
    return os.environ.get("LLMDECK_DEBUG", "").lower() in {"1", "true", "yes", "on"}


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, map every error to a message and an exit code."""
    from llmdeck.errors import LlmdeckError

    click_exc = _click_exceptions()
    app = build_app()
    try:
        rv = app(args=argv, prog_name="llmdeck", standalone_mode=False)
        if isinstance(rv, int) and rv != 0:  # click returns 130 (not raising) on Ctrl-C here
            sys.exit(rv)
    except LlmdeckError as exc:
        if _debug():
            raise
        _print_error(exc)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("Aborted.\n")
        sys.exit(130)
    except click_exc.ClickException as exc:  # usage errors: unknown command, bad option value …
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        sys.exit(130)
    except Exception as exc:  # an unexpected bug: one line, unless debugging
        if _debug():
            raise
        _print_internal(exc)
        sys.exit(1)
    sys.exit(0)


def _print_error(exc: Any) -> None:
    from rich.markup import escape

    from llmdeck.cli.output import err_console

    text = escape(exc.render())
    tail = getattr(exc, "log_tail", "")
    console = err_console()
    console.print(f"[bold red]error:[/] {text}", highlight=False, markup=True, soft_wrap=True)
    if tail:
        console.print("[dim]--- log tail ---[/]")
        console.print(tail, markup=False, highlight=False)


def _print_internal(exc: Exception) -> None:
    sys.stderr.write(
        f"error: internal error: {type(exc).__name__}: {exc}. This is a bug in llmdeck; "
        "run again with LLMDECK_DEBUG=1 for the traceback and report it.\n"
    )
