"""The llmdeck CLI root: registers every command group and maps errors to exit codes.

Each module in ``COMMAND_MODULES`` is one command group; it exposes ``register(app)`` and
imports nothing heavy at module level, so ``llmdeck --help`` stays instant.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

import typer

from llmdeck import __version__

# One place that lists the command groups, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "quickstart",
    "doctor",
    "plan",
    "fetch",
    "server",
    "check",
    "connect",
    "launch",
    "bench",
    "tune",
    "eval",
    "gateway",
    "keys",
    "cluster",
    "model",
    "migrate",
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


# Commands that write nothing under llmdeck's folders: a read-only or missing HOME (no state folder
# can be made) had stopped them all with exit 2, doctor included, whose job is to say what is wrong.
# They run; doctor reports the folder as a finding. Every other command still stops with that error.
# A group's command is named with its group ("keys list"): the root callback runs before click knows
# which command of the group was asked, so it lets the group's load pass and the group's callback
# (_writers_need_folders) stops its other commands with the error, as the root does.
WRITES_NO_STATE = frozenset(
    {"doctor", "status", "logs", "plan", "models", "recommend", "check", "connect", "report"}
    | {"keys list", "gateway status", "cluster status", "cluster logs"}
)


def _groups_with_readers() -> frozenset[str]:
    return frozenset(name.split()[0] for name in WRITES_NO_STATE if " " in name)


def _writers_need_folders(ctx: typer.Context) -> None:
    """A group's command not in WRITES_NO_STATE (``keys create``, ``gateway up``): the folder error that
    the root let pass for the group's readers stops it, exit 2 with the same message as before."""
    settings = ctx.find_root().obj
    error = getattr(settings, "folder_error", None)
    if error is not None and f"{ctx.info_name} {ctx.invoked_subcommand}" not in WRITES_NO_STATE:
        raise error


def _guard_group_writers(app: typer.Typer) -> None:
    """:func:`_writers_need_folders` as the callback of each group that has a reader in WRITES_NO_STATE."""
    groups = _groups_with_readers()
    for group in app.registered_groups:
        sub = group.typer_instance
        name = group.name or (sub.info.name if sub is not None else None)  # add_typer(name=) or Typer(name=)
        if sub is not None and name in groups:
            if sub.registered_callback is not None:  # pragma: no cover - a programming error
                raise RuntimeError(f"the {name} group has its own callback")
            sub.callback()(_writers_need_folders)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="llmdeck",
        help=reflow_help(HELP),
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
        from llmdeck.settings import load_settings

        if not any(_HELP_ASKED):  # `llmdeck CMD --help` prints the help whatever LLMDECK_* hold
            sub = ctx.invoked_subcommand
            ctx.obj = load_settings(writes=sub not in WRITES_NO_STATE | _groups_with_readers())

    for name in COMMAND_MODULES:
        module = importlib.import_module(f"llmdeck.cli.{name}")
        module.register(app)
    _guard_group_writers(app)
    _reflow_app_help(app)
    return app


def reflow_help(text: str) -> str:
    """Join a help text's prose lines so rich wraps them to the terminal.

    Typer's "rich" markup mode keeps single line breaks, so a docstring wrapped at 100 columns prints
    ragged on an 80-column terminal. Paragraphs whose lines are indented (examples, tables) keep their
    breaks; every other paragraph becomes one line.
    """
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    out = []
    for para in paragraphs:
        lines = para.splitlines()
        if para.startswith("\b") or any(line[:1].isspace() for line in lines):
            out.append(para)
        else:
            out.append(" ".join(line.strip() for line in lines))
    if len(out) == 1:
        return out[0]
    return out[0] + "\n\n" + _survive_cleandoc("\n\n".join(out[1:]))


def _survive_cleandoc(rest: str) -> str:
    """Keep the indent of examples through typer's dedent of the text after the first paragraph.

    Typer runs inspect.cleandoc on it, which skips its first line when it measures the common indent:
    after a lone "Examples:" every example would lose its indent and print like prose. An empty rich
    markup tag in front of the first indented line gives that line no indent to measure, so nothing is
    removed; it renders as nothing (the app uses rich markup mode).
    """
    lines = rest.split("\n")
    body = [i for i, line in enumerate(lines) if i > 0 and line.strip()]
    if body and all(lines[i][:1].isspace() for i in body):
        lines[body[0]] = "[dim][/dim]" + lines[body[0]]
    return "\n".join(lines)


def _reflow_app_help(app: typer.Typer) -> None:
    """reflow_help on every command's help (given, or the callback's docstring), sub-apps included."""
    import inspect

    for cmd in app.registered_commands:
        text = cmd.help if isinstance(cmd.help, str) else None
        if text is None and cmd.callback is not None:
            text = inspect.getdoc(cmd.callback)
        if text:
            cmd.help = reflow_help(text)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            info = group.typer_instance.info  # the group's own help: `gateway` and `cluster` had
            if isinstance(info.help, str):  # printed ragged in `llmdeck --help`, one break kept
                info.help = reflow_help(info.help)
            _reflow_app_help(group.typer_instance)


def _click_exceptions() -> Any:
    """click's exception module: typer >= 0.2x vendors click as typer._click, older typer uses click."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def _debug() -> bool:
    from llmdeck.settings import debug_enabled

    return debug_enabled()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a closed terminal) raised as an interrupt: every clean-up that runs on Ctrl-C
    (``up`` stops the engine it was starting, ``bench`` keeps its partial result, ``tune`` stops its
    trial's server) runs on it too; the exit code is 128 + the signal (143, 129)."""


_SIGNALLED: list[int] = []
_HELP_ASKED: list[bool] = []
"""Whether the command line asks for a command's help (-h, --help before `--`): the root callback, which
runs before the command parses its own options, then leaves the settings to the command (a bad
LLMDECK_* variable had made every `llmdeck CMD --help` exit 2; the command itself still refuses it)."""


def _on_sigterm(signum: int, frame: object) -> None:
    _SIGNALLED.append(signum)
    raise Terminated(f"terminated (signal {signum})")


def _install_sigterm() -> dict[int, Any]:
    """SIGTERM and SIGHUP → :class:`Terminated` while the command runs (main thread only; SIGHUP had
    killed a bench or a tune outright, its engine left running); the old handlers."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _on_sigterm) for sig in (signal.SIGTERM, signal.SIGHUP)}


def _interrupted(terminated: bool) -> None:
    """Exit 130 after Ctrl-C, 128 + the signal after SIGTERM (143) or SIGHUP (129), saying which."""
    import signal

    if terminated or _SIGNALLED:
        sig = signal.Signals(_SIGNALLED[-1] if _SIGNALLED else signal.SIGTERM)
        sys.stderr.write(f"Terminated ({sig.name}).\n")
        sys.exit(128 + sig.value)
    sys.stderr.write("Interrupted (Ctrl-C).\n")
    sys.exit(130)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, map every error to a message and an exit code."""
    import signal

    from llmdeck.cli.streams import guard_streams

    guard_streams()
    _SIGNALLED.clear()
    previous = _install_sigterm()
    hook = sys.unraisablehook
    sys.unraisablehook = _quiet_interrupts(hook)
    try:
        _main(argv)
    finally:
        sys.unraisablehook = hook
        for sig, before in previous.items():
            signal.signal(sig, before)


def _quiet_interrupts(hook: Any) -> Any:
    """Ctrl-C landing in a finalizer (asyncio's loop closing, a weakref callback) is printed by Python
    as "Exception ignored in ... Traceback ... KeyboardInterrupt" beside llmdeck's own "Interrupted":
    that one is dropped (unless LLMDECK_DEBUG=1); every other unraisable error is reported as ever."""

    def quiet(unraisable: Any) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt) and not _debug():
            return
        hook(unraisable)

    return quiet


def _main(argv: list[str] | None) -> None:
    from llmdeck.cli.failures import known_failure
    from llmdeck.cli.output import json_written
    from llmdeck.errors import InternalError, LlmdeckError

    json_written(reset=True)
    args = list(sys.argv[1:] if argv is None else argv)
    _HELP_ASKED[:] = [bool({"-h", "--help"} & set(args[: args.index("--")] if "--" in args else args))]
    click_exc = _click_exceptions()
    app = build_app()
    try:
        rv = app(args=argv, prog_name="llmdeck", standalone_mode=False)
        if rv == 130:  # typer turns KeyboardInterrupt (Ctrl-C, or SIGTERM as Terminated) into 130
            _interrupted(False)
        if isinstance(rv, int) and rv != 0:
            sys.exit(rv)
    except LlmdeckError as exc:
        if _debug() and isinstance(exc, InternalError):
            raise
        if _debug():  # the traceback, then the message, the --json error and the exit code as ever
            traceback.print_exc()
        if isinstance(exc, InternalError):  # meant for a caller inside llmdeck: reaching here is a bug
            _print_internal(exc, argv)
        else:
            _print_error(exc)
            _json_error(argv, type(exc).__name__, exc.exit_code, exc.render())
        signalled = exc.exit_code == 130 and _SIGNALLED  # bench's partial result after a SIGTERM: 143
        sys.exit(128 + _SIGNALLED[-1] if signalled else exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt) or _SIGNALLED:
            _interrupted(isinstance(exc.__cause__, Terminated))
        sys.stderr.write("Aborted.\n")
        sys.exit(130)
    except click_exc.ClickException as exc:  # usage errors: unknown command, bad option value …
        if isinstance(exc, click_exc.NoSuchOption):
            exc.message = _no_such_option(exc)
            exc.possibilities = None
        exc.message = _shortened(exc.message)
        exc.show()
        code = 2 if exc.exit_code in (1, 2) else exc.exit_code
        _json_error(argv, "UsageError", code, exc.format_message())
        sys.exit(code)
    except KeyboardInterrupt as exc:
        _interrupted(isinstance(exc, Terminated))
    except Exception as exc:  # an unexpected bug: one line, unless debugging
        failure = known_failure(exc)  # no caller mapped it, but what it means is known
        if _debug() and failure is None:
            raise
        if _debug():
            traceback.print_exc()
        if failure is not None:
            _print_error(failure)
            _json_error(argv, type(failure).__name__, failure.exit_code, failure.render())
        else:
            _print_internal(exc, argv)
        sys.exit(1 if failure is None else failure.exit_code)
    sys.exit(0)


def _no_such_option(exc: Any) -> str:
    """``No such option --contxt; did you mean --context?`` (click's closest match), else where to look."""
    import difflib

    name = exc.option_name
    known = list(exc.possibilities or ())
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
    if close:
        return f"No such option {name}; did you mean {close[0]}?"
    return (
        f"No such option {name}. See the command's --help; flags for vLLM (plan, up) go after `--`, "
        "e.g. `-- --max-model-len 8192`."
    )


def _print_error(exc: Any) -> None:
    from rich.markup import escape

    from llmdeck.cli.output import err_console
    from llmdeck.util.redact import redact_text

    text = escape(_shortened(redact_text(exc.render())))
    tail = redact_text(getattr(exc, "log_tail", "") or "")
    console = err_console()
    console.print(f"[bold red]error:[/] {text}", highlight=False, markup=True, soft_wrap=True)
    if tail:
        console.print("[dim]--- log tail ---[/]")
        console.print(tail, markup=False, highlight=False)


def _json_error(argv: list[str] | None, kind: str, exit_code: int, message: str) -> None:
    """Under --json, scripts read stdout: the error as one JSON object there too, unless the command
    already wrote its document (llmdeck's own options only: what follows `--` is vLLM's)."""
    import contextlib

    from llmdeck.cli.output import json_written, print_json

    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--")] if "--" in args else args
    if "--json" not in own or json_written():
        return
    error = {"kind": kind, "exit_code": exit_code, "message": _shortened(message)}
    with contextlib.suppress(OSError):  # stdout that cannot be written (a full disk) takes none either
        print_json({"error": error})  # redacts every string


def _shortened(message: str) -> str:
    """A message with any huge word (a pasted 100,000-character value) shown cut."""
    from llmdeck.util.safetext import shorten_long_words

    return shorten_long_words(message)


def _print_internal(exc: Exception, argv: list[str] | None) -> None:
    """A bug's one line on stderr (and, under --json, its JSON error on stdout: scripts read that)."""
    from llmdeck.cli.output import safe_text
    from llmdeck.util.redact import redact_text

    shown = safe_text(_shortened(redact_text(str(exc))))
    message = (
        f"internal error: {type(exc).__name__}: {shown}. This is a bug in "
        "llmdeck; run again with LLMDECK_DEBUG=1 for the traceback and report it."
    )
    sys.stderr.write(f"error: {message}\n")
    _json_error(argv, "InternalError", 1, message)
