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


def _utc_minute(stamp: str) -> str:
    """``2026-12-06T05:35:45.622586Z`` as ``2026-12-06 05:35 UTC``: the column had shown the UTC time
    with its zone cut off, read as local time (8 hours off under TZ=Asia/Shanghai)."""
    return f"{stamp[:16].replace('T', ' ')} UTC" if len(stamp) >= 16 else stamp


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
            _utc_minute(str(r["created_at"])),
        )
    out_console().print(table)
    if not rows:  # an empty table alone had not said whether the file was read at all
        out_console().print(
            "No keys recorded yet; `llmdeck keys create NAME` makes one.", markup=False, highlight=False
        )


def _show_secret(
    name: str, secret: str, path: Path, allowed: list[str] | None, rpm: int | None, *, as_json: bool
) -> None:
    """The new key on stdout, once (plain writes: an OSError reaches the caller, never rich's exit)."""
    import sys

    if as_json:
        print_json(
            {"name": name, "key": secret, "models": allowed, "rpm": rpm, "keys_file": str(path)},
            shown_once="key",  # only its digest is kept: redacted here, it would be lost
        )
        return
    err_console().print(
        f"key {name!r} created in {path}; it is shown only now:",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    sys.stdout.write(secret + "\n")
    sys.stdout.flush()


def _revoke_unshown(store: Any, name: str, exc: OSError) -> None:
    """A key nobody saw cannot be used and is never shown again: it is revoked, and the error says so
    (it had been kept, with exit 0 when stdout was closed, or a silent exit 1 when the pipe's reader
    had gone)."""
    import contextlib
    import sys

    from llmdeck.cli.streams import ClosedStream
    from llmdeck.errors import OperationError

    store.revoke(name)
    with contextlib.suppress(OSError):  # what is still buffered for the broken stdout goes nowhere
        sys.stdout.flush()
    sys.stdout = ClosedStream("stdout", fail=True)
    raise OperationError(
        f"The new key {name!r} could not be written to stdout ({exc.strerror or exc}), and only its "
        "digest is kept: it was revoked, so no key that nobody has seen stays valid.",
        hint="Run `llmdeck keys create` again with stdout on a terminal or redirected to a file.",
    ) from exc


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
        try:
            _show_secret(name, secret, store.path, allowed, rpm, as_json=as_json)
        except OSError as exc:  # stdout closed, a reader gone (`| head -0`), a full disk
            _revoke_unshown(store, name, exc)

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
