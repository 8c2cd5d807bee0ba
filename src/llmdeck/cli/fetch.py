"""CLI command: fetch (download a model from the Hugging Face Hub or a mirror, then verify it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from llmdeck.cli.options import request_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json


def _local_dir(value: str) -> Path:
    """--local-dir: a folder; an empty value had meant the current folder, taken as the model folder."""
    if not value.strip():
        raise typer.BadParameter("an empty value names no folder; give a folder, or leave --local-dir out.")
    return Path(value)


MAX_REVISION = 255


def _revision(value: str | None) -> str | None:
    """--revision: a branch, tag or commit as the hub's URLs carry it (bad input, not a failed download)."""
    if value is None:
        return None
    from llmdeck.cli.validate import not_utf8
    from llmdeck.util.safetext import is_unsafe

    if not value.strip() or value != value.strip() or any(is_unsafe(c) or c in "\n\t" for c in value):
        why = "is empty, has spaces around it or control characters in it"
    elif not_utf8(value):
        why = "holds bytes that are not UTF-8 text"
    elif len(value) > MAX_REVISION:
        why = f"is {len(value)} characters long (a branch, tag or commit has at most {MAX_REVISION})"
    else:
        return value
    shown = repr(value) if len(value) <= 80 else f"{value[:60]!r}…"
    raise typer.BadParameter(f"{shown} {why}; give a branch, tag or commit, e.g. main, or leave it out.")


LOCAL_DIR_OPTION = typer.Option(
    None, "--local-dir", parser=_local_dir, help="Where to put the files (default: LLMDECK_MODELS_DIR/NAME)."
)
REVISION_OPTION = typer.Option(
    None, "--revision", callback=_revision, help="Branch, tag or commit (default main)."
)


def fetch(
    ctx: typer.Context,
    repo_id: str = typer.Argument(..., metavar="REPO_ID", help="Hugging Face repo id, e.g. Qwen/Qwen3-0.6B."),
    local_dir: Path | None = LOCAL_DIR_OPTION,
    revision: str | None = REVISION_OPTION,
    endpoint: str | None = typer.Option(
        None,
        "--endpoint",
        help="Hub endpoint or mirror, e.g. https://hf-mirror.com (default: HF_ENDPOINT).",
    ),
    include: list[str] | None = typer.Option(
        None, "--include", help="Only files matching this glob (repeatable), e.g. --include '*.json'."
    ),
    config_only: bool = typer.Option(
        False, "--config-only", help="Only config.json, tokenizer files and the safetensors index."
    ),
    timeout: float = request_timeout(
        30.0,
        " the hub's API about the repo (with --config-only, each file gets 10 times it; weights none)",
        ": a silent or trickling endpoint is reported as not answering after it",
    ),
    keep_page_cache: bool = typer.Option(
        False,
        "--keep-page-cache",
        help="Leave the downloaded files in page cache (by default they are dropped: on unified memory "
        "such as a DGX Spark that cache counts against the next vLLM start).",
    ),
    checksum: bool = typer.Option(
        False,
        "--checksum",
        help="Also compare the sha256 of every file the hub hashes (the weights) with the hub's: each byte "
        "is read once more, about a minute per 60 GB. Run on a fetched folder, it checks that copy.",
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Download a model and verify it (run it again after an interruption: the files already whole are kept).

    Files go to LLMDECK_MODELS_DIR/NAME unless --local-dir says otherwise; a mirror comes from
    --endpoint or HF_ENDPOINT. What arrived is verified without loading it: every shard of the
    index present, every safetensors header covering its data, sizes as the hub lists them.

    Examples:

      llmdeck fetch Qwen/Qwen3-0.6B

      llmdeck fetch Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8 --endpoint https://hf-mirror.com

      llmdeck fetch Qwen/Qwen3-30B-A3B --config-only --json

      llmdeck fetch Qwen/Qwen3-0.6B --keep-page-cache   # about to start it off a fast disk anyway

      llmdeck fetch Qwen/Qwen3-0.6B --checksum   # each weight file's sha256 against the hub's
    """
    opts = {"local_dir": local_dir, "revision": revision, "endpoint": endpoint, "include": include or None}
    more = {"config_only": config_only, "answer_timeout_s": timeout, "keep_page_cache": keep_page_cache}
    more["checksum"] = checksum
    _fetch(ctx, repo_id, {**opts, **more}, json_out)


def _fetch(ctx: typer.Context, repo_id: str, opts: dict[str, Any], json_out: bool) -> None:
    """The body of `llmdeck fetch`: download with progress on stderr, then print the result."""
    from llmdeck.fetch.hub import fetch_model
    from llmdeck.util import shellquote

    settings = get_settings(ctx)
    console = err_console()

    def warn(message: str) -> None:
        console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)

    what = "config and tokenizer of " if opts["config_only"] else ""
    console.print(
        f"Fetching {what}{repo_id} (whole files are kept if interrupted; progress below) ...",
        highlight=False,
        markup=False,
    )
    result = fetch_model(
        repo_id,
        models_dir=settings.models_dir,
        warn=warn,
        on_wait=lambda text: console.print(f"[dim]{escape(text)} …[/]", highlight=False),
        **opts,
    )
    for note in (n for n in result.verify.notes if n.startswith("--checksum")):
        warn(note)  # asked for and not done: said on stderr, --json or not
    if json_out:
        print_json(result)
        return
    checked = len(result.verify.checked_files)
    sizes = "sizes match the hub" if result.verify.sizes_checked else "hub sizes unavailable"
    if result.verify.sha256_checked:
        sizes += f", sha256 of {result.verify.sha256_checked} files match"
    out_console().print(
        f"{result.repo_id} -> {result.local_dir}\n"
        f"  {result.files} files, {result.total_bytes / 1e9:.2f} GB from {result.endpoint} "
        f"in {result.seconds:.1f} s\n"
        f"  verified: {checked} files checked, {sizes}"
        + (f"\n  architecture: {result.architecture}" if result.architecture else "")
        + (
            f"\n  page cache: dropped {result.page_cache_dropped_bytes / 1e9:.2f} GB of it "
            "(--keep-page-cache keeps it)"
            if result.page_cache_dropped_bytes
            else ""
        )
        + f"\n  serve it: llmdeck up --model {shellquote.quote(result.local_dir)}",  # a path is data
        highlight=False,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("fetch")(fetch)
