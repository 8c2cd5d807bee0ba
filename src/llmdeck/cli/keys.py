"""CLI group: keys — the gateway's API keys (create, list, revoke)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import utf8_text

KEYS_HELP = """The gateway's API keys: stored as salted HMAC-SHA256 digests in a 0600 file, shown once.

The gateway re-reads the file within a second of a change: no restart needed.

Examples:

  llmdeck keys create alice --models qwen-fast --rpm 60

  llmdeck keys list

  llmdeck keys revoke alice
"""

FILE_OPTION = typer.Option(
    None,
    "--keys-file",
    help="The keys file (default: <state dir>/gateway/keys.json; the config's keys_file).",
)


def _store(ctx: typer.Context, path: Path | None) -> Any:
    from llmdeck.gateway.config import default_keys_file
    from llmdeck.gateway.keys import KeyStore

    return KeyStore(path if path is not None else default_keys_file(get_settings(ctx)))


def _allowed(models: str | None) -> list[str] | None:
    """--models: the aliases, or None for all; one naming no alias is refused (UsageError)."""
    from llmdeck.gateway.keys import parse_models

    return parse_models(models)


def _print_table(rows: list[dict[str, Any]], path: Path) -> None:
    from rich.table import Table

    table = Table(title=f"keys in {path}")
    for col in ("name", "starts with", "models", "rpm", "created"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r["name"]),
            f"{r['hint']}…",
            ", ".join(r["models"] or []) or "all",
            str(r["rpm"] or "-"),
            str(r["created_at"])[:19],
        )
    out_console().print(table)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    keys = typer.Typer(name="keys", help=KEYS_HELP, no_args_is_help=True)

    @keys.command("create")
    def create_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Who the key is for (shown in logs and metrics)."),
        models: str = typer.Option(
            None, "--models", callback=utf8_text, help="Comma-separated aliases it may use (default: all)."
        ),
        rpm: int = typer.Option(None, "--rpm", help="Requests per minute (default: no limit)."),
        keys_file: Path = FILE_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Make a key and print it once (stdout); only its digest is kept. Example: llmdeck keys create
        alice --models qwen-fast,qwen-think --rpm 60"""
        allowed = _allowed(models)  # before the store: a bad --models touches no file
        store = _store(ctx, keys_file)
        secret = store.create(name, models=allowed, rpm=rpm)
        if as_json:
            print_json(
                {"name": name, "key": secret, "models": allowed, "rpm": rpm, "keys_file": str(store.path)},
                shown_once="key",  # only its digest is kept: redacted here, it would be lost
            )
            return
        err_console().print(
            f"key {name!r} created in {store.path}; it is shown only now:",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        out_console().print(secret, markup=False, highlight=False)

    @keys.command("list")
    def list_cmd(ctx: typer.Context, keys_file: Path = FILE_OPTION, as_json: bool = JSON_OPTION) -> None:
        """The keys' names, limits and first characters (never the keys).

        Example: llmdeck keys list --json
        """
        store = _store(ctx, keys_file)
        rows = [k.public() for k in store.load().keys]
        if as_json:
            print_json(rows)
            return
        _print_table(rows, store.path)

    @keys.command("revoke")
    def revoke_cmd(
        ctx: typer.Context, name: str = typer.Argument(...), keys_file: Path = FILE_OPTION
    ) -> None:
        """Remove a key; the gateway refuses it within a second.

        Example: llmdeck keys revoke alice
        """
        store = _store(ctx, keys_file)
        store.revoke(name)
        out_console().print(f"key {name!r} revoked", markup=False)

    app.add_typer(keys)
