"""CLI group: connect — wire a client (opencode, Claude Code, Codex, Qwen Code, aider, …) to a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmdeck.cli.options import request_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import api_key_option

CONNECT_HELP = """Write (or print) CLIENT's configuration for a running server.

Reads the served model name, base URL, context length, tool and thinking behaviour from the live \
server, then merges the client's block into its config file, keeping every other key (and, in YAML \
and TOML files, your comments) and backing the old file up first (FILE.bak-<timestamp>).

Your own inputs are checked first (the client, the flags, the file to merge into: a folder, a \
read-only or malformed file is exit 2), then the server.

For a client llmdeck has a recording of (opencode, continue, cline, claude-code, codex, aider), the \
context and output limits come from its real base prompt, so that it compacts before the server \
refuses; a server that cannot hold that prompt gets no config (exit 1, with the --max-model-len to \
restart with).

Default files: opencode → ./opencode.json, openclaw → ~/.openclaw/openclaw.json, continue → \
~/.continue/config.yaml, claude-code → ~/.claude/settings.json (its env block; $CLAUDE_CONFIG_DIR), \
codex → ~/.codex/config.toml ($CODEX_HOME), qwen-code → ~/.qwen/settings.json ($QWEN_HOME), aider → \
./.aider.conf.yml (+ .aider.model.metadata.json beside it); cline and openai are printed unless \
--file is given (cline: also the `cline auth` command its CLI takes).

Examples:

  llmdeck connect opencode --server http://127.0.0.1:8000

  llmdeck connect continue --server default --print

  llmdeck connect opencode --server gateway --model qwen-fast --api-key sk-llmdeck-…

  llmdeck connect claude-code --server gateway --model coder --api-key sk-llmdeck-…

  eval "$(llmdeck connect claude-code --print)"  # export lines, shell-quoted: safe to eval

  llmdeck connect codex --server default         # ~/.codex/config.toml, comments kept

  eval "$(llmdeck connect openai --print)"     # values are shell-quoted: safe to eval
"""


def _gateway_or_target(server: str, settings: Any) -> Any:
    """`--server gateway`: the running llmdeck gateway (its aliases; pass its key with --api-key)."""
    from llmdeck.gateway.service import gateway_target
    from llmdeck.runtime.target import resolve_target

    return gateway_target(settings) or resolve_target(server, settings)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("connect", help=CONNECT_HELP)(connect)


def connect(
    ctx: typer.Context,
    client: str = typer.Argument(
        ..., help="opencode, openclaw, continue, cline, openai, claude-code, codex, qwen-code or aider."
    ),
    server: str | None = typer.Option(None, "--server", "-s", help="Server URL or llmdeck server name."),
    file: Path | None = typer.Option(None, "--file", "-f", help="Config file to merge into (or create)."),
    print_only: bool = typer.Option(False, "--print", help="Print the configuration; write nothing."),
    model: str | None = typer.Option(None, "--model", "-m", help="Served model name (default: the first)."),
    api_key: str | None = api_key_option(),
    provider_id: str = typer.Option("vllm", "--provider-id", help="Provider key in the client config."),
    timeout: float = request_timeout(60.0, detail=" (one that does not answer /health: 10 s)"),
    thinking: str = typer.Option(
        "server",
        "--thinking",
        help="server: leave thinking to the server; on/off: send chat_template_kwargs.",
    ),
    small_model: str | None = typer.Option(
        None, "--small-model", help="claude-code: the model for its small/fast (haiku) requests."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Write a client's configuration from the live server (see CONNECT_HELP)."""
    opts = {"provider_id": provider_id, "thinking": thinking, "small_model": small_model}
    _connect(ctx, client, server, file, print_only, model, api_key, timeout, opts, json_out)


def _connect(
    ctx: typer.Context,
    client: str,
    server: str | None,
    file: Path | None,
    print_only: bool,
    model: str | None,
    api_key: str | None,
    timeout: float,
    opts: dict[str, Any],
    json_out: bool,
) -> None:
    from llmdeck.connect import connect_client, gather_info
    from llmdeck.connect.run import check_target, validate_request
    from llmdeck.runtime.target import resolve_target
    from llmdeck.util.redact import redact_url

    # the user's own inputs first (#38): the client, the flags, the file; then the server
    name = validate_request(client, opts["thinking"], opts["provider_id"])
    from llmdeck.errors import UsageError

    for flag, value in (("--model", model), ("--small-model", opts["small_model"])):
        if value is not None and not value.strip():  # had fallen back to the first model silently
            raise UsageError(f"{flag} is empty.", hint="Give a served model name (or leave it out).")
    if server is not None and not server.strip():
        raise UsageError(
            "--server is empty.", hint="Give a server URL or an llmdeck server name, or leave it out."
        )
    if file is not None and str(file).strip() in ("", "."):
        raise UsageError(
            "--file names no file (empty, or '.').", hint="Give a config file's path, or leave it out."
        )
    check_target(name, file, print_only)
    settings = get_settings(ctx)
    tgt = _gateway_or_target(server, settings) if server == "gateway" else resolve_target(server, settings)
    err = err_console()
    err.print(f"reading {redact_url(tgt.base_url)} …", highlight=False, markup=False)
    info = gather_info(
        tgt.base_url,
        model=model or tgt.model,
        api_key=api_key,
        settings=settings,
        timeout=timeout,
        client=name,
    )
    result = connect_client(name, info, file=file, print_only=print_only, **opts)
    _render(name, info, result, json_out)


def _without_key(result: Any, key: str | None) -> Any:
    """The result as JSON data with the key itself replaced wherever it appears (a TOML bearer token,
    the `cline auth` argv), not only under the names the general redactor knows."""
    from llmdeck.util.redact import hide_key

    data = result.model_dump(mode="json")
    return hide_key(data, key) if key else data


def _render(name: str, info: Any, result: Any, json_out: bool) -> None:
    from llmdeck.util.redact import redact_text, redact_url

    if json_out:
        print_json(_without_key(result, info.api_key))
        return
    if result.action == "printed":
        out_console().print(result.text, markup=False, highlight=False, end="")
    else:
        where = {
            "created": f"wrote {result.path}",
            "updated": f"updated {result.path} (backup: {result.backup})",
            "unchanged": f"{result.path} already up to date",
        }[result.action]
        out_console().print(
            f"{name}: {where} — model {info.model}, base URL {redact_url(info.api_base)}, "
            f"context {info.context}",
            markup=False,
            highlight=False,
        )
        for extra in result.files:
            out_console().print(f"{name}: {extra.action} {extra.path}", markup=False, highlight=False)
    for note in result.notes:  # stderr never shows the key (only the printed config carries it)
        err_console().print(f"note: {redact_text(note)}", highlight=False, markup=False)
