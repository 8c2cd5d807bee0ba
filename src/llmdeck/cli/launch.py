"""CLI: launch — configure a client for the running server (or gateway) and start it, in one step."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

from llmdeck.cli.options import request_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import api_key_option, nonempty

LAUNCH_HELP = """Start CLIENT configured for a running server, as `ollama launch` does.

Reads the live server (model, context length, the client's recorded base prompt; a server too \
small for it is exit 1 with the --max-model-len to use), then runs the client with what it reads \
given the highest precedence for this run only: environment variables, command-line overrides and \
settings files of llmdeck's own under the state folder (0600). The user's own files are not \
touched. Arguments after `--` go to the client.

Clients: claude-code (claude), codex, qwen-code (qwen), opencode, aider. The binary is looked up \
on PATH (or --bin); a missing one is exit 2 with its pinned install command.

Examples:

  llmdeck launch claude-code                       # the default server

  llmdeck launch codex gateway --model coder --api-key sk-llmdeck-… -- exec 'fix the test'

  llmdeck launch claude-code http://127.0.0.1:8000 -- -p 'Say hello'

  llmdeck launch opencode --dry-run                # what would run (secrets redacted)
"""


class LaunchCommand(TyperCommand):
    """What follows ``--`` goes to the client; an extra word before it is a usage error."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from llmdeck.cli.validate import _usage_error

        cut = args.index("--") if "--" in args else len(args)
        own, forwarded = args[:cut], args[cut + 1 :]
        rest = super().parse_args(ctx, own)
        if ctx.args:
            raise _usage_error()(
                f"Unexpected argument {ctx.args[0]!r}. Arguments for the client go after `--`, "
                "e.g. `llmdeck launch claude-code -- -p 'Say hello'`.",
                ctx=ctx,
            )
        ctx.args = list(forwarded)
        return list(rest)


def register(app: typer.Typer) -> None:
    app.command("launch", help=LAUNCH_HELP, cls=LaunchCommand, context_settings={"allow_extra_args": True})(
        launch_cmd
    )


def launch_cmd(
    ctx: typer.Context,
    client: str = typer.Argument(..., help="claude-code, codex, qwen-code, opencode or aider."),
    target: str | None = typer.Argument(
        None, callback=nonempty, help="Server URL, llmdeck server name, or 'gateway'."
    ),
    model: str | None = typer.Option(None, "--model", "-m", help="Served model or gateway alias."),
    api_key: str | None = api_key_option(),
    bin_path: str | None = typer.Option(None, "--bin", help="The client's executable (default: on PATH)."),
    small_model: str | None = typer.Option(None, "--small-model", help="claude-code: its small/fast model."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run; start nothing."),
    timeout: float = request_timeout(60.0),
    json_out: bool = JSON_OPTION,
) -> None:
    """Start a client configured for the live server (see LAUNCH_HELP)."""
    from llmdeck.cli.connect import _gateway_or_target
    from llmdeck.connect import gather_info
    from llmdeck.connect.launch import plan_launch
    from llmdeck.runtime.target import resolve_target
    from llmdeck.util.redact import redact_url

    name = _validated(client, model, small_model)
    preview = dry_run or json_out
    binary, missing = _binary(name, bin_path, preview)
    settings = get_settings(ctx)
    tgt = _gateway_or_target(target, settings) if target == "gateway" else resolve_target(target, settings)
    err_console().print(f"reading {redact_url(tgt.base_url)} …", highlight=False, markup=False)
    info = gather_info(
        tgt.base_url,
        model=model or tgt.model,
        api_key=api_key,
        settings=settings,
        timeout=timeout,
        client=name,
    )
    plan = plan_launch(name, binary, info, settings.state_dir, list(ctx.args), small_model=small_model)
    if missing:
        plan.notes.append(missing)
    for note in plan.notes:
        err_console().print(f"note: {note}", highlight=False, markup=False)
    if json_out:
        print_json(plan.shown())
        return
    if dry_run:
        out_console().print(_shell_line(plan.shown()), markup=False, highlight=False)
        return
    from llmdeck.connect.launch import exec_client

    err_console().print(
        f"starting {name}: {info.model} at {redact_url(info.base_url)}", highlight=False, markup=False
    )
    exec_client(plan)


def _validated(client: str, model: str | None, small_model: str | None) -> str:
    from llmdeck.connect.launch import LAUNCH_CLIENTS
    from llmdeck.errors import UsageError

    name = client.strip().lower()
    if name not in LAUNCH_CLIENTS:
        raise UsageError(
            f"llmdeck cannot launch {client!r}.", hint=f"Use one of: {', '.join(LAUNCH_CLIENTS)}."
        )
    for flag, value in (("--model", model), ("--small-model", small_model)):
        if value is not None and not value.strip():
            raise UsageError(f"{flag} is empty.", hint="Give a served model name (or leave it out).")
    return name


def _binary(name: str, bin_path: str | None, preview: bool) -> tuple[str, str | None]:
    """The client's executable; a missing one is exit 2, except in a preview (then a note)."""
    from llmdeck.connect.launch import LAUNCH_CLIENTS, find_binary
    from llmdeck.errors import UsageError

    try:
        return find_binary(name, bin_path), None
    except UsageError as exc:
        if not preview:
            raise
        return bin_path or LAUNCH_CLIENTS[name], f"{exc.message} {exc.hint or ''}".strip()


def _shell_line(shown: dict[str, Any]) -> str:
    """``env -u X K='v' … argv``: what would run, shell-quoted, with secrets already redacted."""
    from llmdeck.util.shellquote import quote

    words = ["env"]
    for name in shown["unset"]:
        words += ["-u", name]
    words += [f"{k}={quote(str(v))}" for k, v in shown["env"].items()]
    words += [quote(a) for a in shown["argv"]]
    files = "".join(f"# writes {path} (llmdeck's, 0600)\n" for path in shown["files"])
    return files + " ".join(words)
